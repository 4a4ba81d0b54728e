"""The program's Chroma process as the host holds it (``sandbox.chroma_store`` is its inside): forked from the
fork server that preloads Chroma, jailed and limited like the program's own process, running no program code.
The host relays each ``toolkit.chroma`` call to it without decoding it (``process``).

Starting one takes about 0.06-0.1 s (the fork, then Chroma's own start), a fifth of an offline evaluation of a
program that keeps vectors: so each is started ahead, one per set of limits, while the evaluation before runs
(``started``).
"""

from __future__ import annotations

import atexit
import logging
import select
import threading
import time
from typing import Any

from mstar_ray.sandbox import wire
from mstar_ray.sandbox_host.fork_server import shared_fork_server
from mstar_ray.sandbox_host.frames import ProtocolError, StoredFrame, ViolationFrame
from mstar_ray.sandbox_host.jail import SandboxStartError, SandboxUnavailable
from mstar_ray.sandbox_host.jailed_process import Fatal, JailedProcess, Overtime
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits

log = logging.getLogger(__name__)


class ChromaProcess(JailedProcess):
    """The program's Chroma process (``sandbox.chroma_store``): forked, jailed and limited like the program's
    own, it runs no program code. Each relayed call waits for it one at a time, within the caller's deadline;
    whatever it does wrong (dying, hanging, sending what it should not) is the program's violation, since only
    the program's calls reach it, and it serves nothing after that."""

    NAME = "the program's Chroma process"

    def __init__(self, limits: SandboxLimits):
        super().__init__(limits, shared_fork_server(chroma=True))
        self._lock = threading.Lock()
        self.begun_at: float | None = None  # time.monotonic() when it was ready

    def begin(self, deadline: float) -> None:
        """Fork it and take its layers; raises as ``JailedProcess._spawn`` does."""
        self._spawn({"fork_readers": False, "role": "store"}, deadline, "the program's Chroma process did not start")
        self.begun_at = time.monotonic()

    def idle(self) -> bool:
        """Alive, and has sent nothing since its layers: fit to serve a program."""
        if self._sock is None or self._pidfd is None or self._dead is not None:
            return False
        ended, _, _ = select.select([self._pidfd], [], [], 0)
        sent, _, _ = select.select([self._sock], [], [], 0)
        return not ended and not sent

    def relay(self, view: int, payload: str, deadline: float) -> str:
        """The answer to one ``toolkit.chroma`` call made in ``view``, as the Chroma process wrote it."""
        return self._ask({"op": "chroma", "view": view, "payload": payload}, deadline)

    def drop(self, view: int) -> None:
        """Forget what a finished reader changed; a Chroma process that fails at it serves nothing more."""
        try:
            self._ask({"op": "drop", "view": view}, time.monotonic() + self.limits.call_timeout_s)
        except (Fatal, TimeoutError):
            pass

    def _ask(self, message: dict[str, Any], deadline: float) -> str:
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise TimeoutError
        try:
            if self._dead is not None:
                raise Fatal(self._dead.kind or "crashed", self._dead.message)
            self._calls += 1
            started = time.monotonic()
            try:
                self._send({**message, "call": self._calls}, deadline)
                frame = self._recv(deadline)
            except (TimeoutError, Overtime):
                self._fatal("timeout", "a Chroma call did not finish within its call's deadline", started, 0)
                raise TimeoutError from None
            except (wire.ChannelClosed, BrokenPipeError, ConnectionResetError):
                self._kill()
                raise self._failed(self._death_kind(), self._death_message("toolkit.chroma"), started) from None
            except (ProtocolError, wire.FrameError, OSError) as exc:
                raise self._failed("protocol", f"the program's Chroma process: {exc}", started) from None
            if isinstance(frame, ViolationFrame):
                raise self._failed("forbidden", f"in the program's Chroma process, {frame.event}: {frame.detail}",
                                   started)
            if not isinstance(frame, StoredFrame) or frame.call != self._calls:
                raise self._failed("protocol", f"the program's Chroma process answered with a {frame.op!r} frame",
                                   started)
            return frame.payload
        finally:
            self._lock.release()

    def _failed(self, kind: str, message: str, started: float) -> Fatal:
        outcome = self._fatal(kind, message, started, 0)
        return Fatal(outcome.kind or kind, outcome.message)


class _Ahead:
    """At most one idle Chroma process per set of limits, started in the background, and at most ``KEEP`` in
    all: an evaluator uses one set of limits, and each process waiting holds its memory."""

    KEEP = 2

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[str, ChromaProcess] = {}
        self._starting: set[str] = set()

    def take(self, limits: SandboxLimits) -> ChromaProcess | None:
        with self._lock:
            process = self._ready.pop(limits.model_dump_json(), None)
        if process is not None and not process.idle():
            process.close()  # died or spoke while it waited: a program must not pay for that
            return None
        return process

    def refill(self, limits: SandboxLimits) -> None:
        key = limits.model_dump_json()
        with self._lock:
            if key in self._ready or key in self._starting:
                return
            self._starting.add(key)
        threading.Thread(target=self._start, args=(limits, key), name="chroma-ahead", daemon=True).start()

    def _start(self, limits: SandboxLimits, key: str) -> None:
        process = ChromaProcess(limits)
        try:
            process.begin(time.monotonic() + limits.call_timeout_s)
        except (SandboxStartError, SandboxUnavailable) as exc:
            log.debug("a Chroma process started ahead did not start: %s", exc)  # the next take starts its own
        finally:
            with self._lock:
                self._starting.discard(key)
                if process.idle():
                    self._ready[key] = process
                surplus = list(self._ready)[:-self.KEEP]  # the oldest first
                dropped = [self._ready.pop(old) for old in surplus]
            for old in dropped:
                old.close()

    def close(self) -> None:
        with self._lock:
            ready, self._ready = list(self._ready.values()), {}
        for process in ready:
            process.close()


_ahead = _Ahead()
atexit.register(_ahead.close)


def started(limits: SandboxLimits, deadline: float) -> ChromaProcess:
    """A Chroma process ready to serve a program under ``limits``: the one started ahead for them if it waited
    alive and silent, else a new one; either way the next one starts ahead. Raises as ``begin`` does."""
    process = _ahead.take(limits)
    if process is None:
        process = ChromaProcess(limits)
        process.begin(deadline)
    _ahead.refill(limits)
    return process
