"""The program's Chroma process as the host holds it (``sandbox.chroma_store`` is its inside): forked from the
fork server that preloads Chroma, jailed and limited like the program's own process, running no program code.
The host relays each ``toolkit.chroma`` call to it without decoding it (``process``)."""

from __future__ import annotations

import threading
import time
from typing import Any

from mstar_ray.sandbox import wire
from mstar_ray.sandbox_host.fork_server import shared_fork_server
from mstar_ray.sandbox_host.frames import ProtocolError, StoredFrame, ViolationFrame
from mstar_ray.sandbox_host.jail import SandboxUnavailable
from mstar_ray.sandbox_host.jailed_process import Fatal, JailedProcess, Overtime
from mstar_ray.sandbox_host.limits import SandboxLimits


class ChromaProcess(JailedProcess):
    """The program's Chroma process (``sandbox.chroma_store``): forked, jailed and limited like the program's
    own, it runs no program code. Each relayed call waits for it one at a time, within the caller's deadline;
    whatever it does wrong (dying, hanging, sending what it should not) is the program's violation, since only
    the program's calls reach it, and it serves nothing after that."""

    NAME = "the program's Chroma process"

    def __init__(self, limits: SandboxLimits):
        super().__init__(limits, shared_fork_server(chroma=True))
        self._lock = threading.Lock()

    def begin(self, deadline: float) -> None:
        self._zygote, self.pid, self._sock = self._fork_server.spawn(
            {**self.limits.model_dump(mode="json"), "fork_readers": False, "role": "store"})
        self._receive_layers(deadline)
        required = {layer: reason for layer, reason in self.missing_layers.items() if layer in self.limits.require}
        if required:
            raise SandboxUnavailable(required)

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
