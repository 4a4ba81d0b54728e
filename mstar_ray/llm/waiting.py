"""Time a caller spends queued for something shared (an endpoint's slots or rate, a reply another caller is
already fetching, a back-off the server asked for), on a clock the caller chose.

A sandboxed program's call has a deadline for its own work; time its toolkit request waits behind other
candidates' load is not its work, so the host excuses it (``mstar_ray.sandbox_host.process``): it runs the
request with ``charged_to(clock)``, and every shared wait on that thread adds to ``clock``, which the host
reads while the wait is still going on. Threads without a clock wait as before.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

_local = threading.local()


class WaitClock:
    """Seconds spent queued, including a wait still under way (read from another thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds = 0.0
        self._since: float | None = None

    def _start(self) -> None:
        with self._lock:
            self._since = time.monotonic()

    def _stop(self) -> None:
        with self._lock:
            if self._since is not None:
                self._seconds += time.monotonic() - self._since
                self._since = None

    @property
    def seconds(self) -> float:
        with self._lock:
            return self._seconds + (time.monotonic() - self._since if self._since is not None else 0.0)


@contextlib.contextmanager
def charged_to(clock: WaitClock) -> Iterator[WaitClock]:
    """Shared waits on this thread count on ``clock`` until the block ends."""
    before = getattr(_local, "clock", None)
    _local.clock = clock
    try:
        yield clock
    finally:
        _local.clock = before


@contextlib.contextmanager
def queued() -> Iterator[None]:
    """Mark a wait for something shared; it counts on this thread's clock, if it has one (no nesting)."""
    clock = getattr(_local, "clock", None)
    if clock is None or clock._since is not None:
        yield
        return
    clock._start()
    try:
        yield
    finally:
        clock._stop()
