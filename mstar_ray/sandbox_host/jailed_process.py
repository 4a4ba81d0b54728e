"""One jailed process as the host holds it: forked by a fork server, its pid learnt from the kernel and held as a
pidfd, its layers checked from outside in /proc, its channel read within deadlines and validated frame by frame
(``frames``), and how it ended. The program's process and its readers (``process``) and its Chroma process
(``chroma_process``) are each one."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from typing import Any

from mstar_ray.sandbox import wire
from mstar_ray.sandbox_host.fork_server import ForkServer, ZygoteHandle, namespaces_of, proc_status, receive_with_pid
from mstar_ray.sandbox_host.frames import AnyFrame, LayersFrame, ProtocolError, parse_frame
from mstar_ray.sandbox_host.jail import SandboxStartError, SandboxUnavailable
from mstar_ray.sandbox_host.outcome import Outcome
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits


class Overtime(Exception):
    """The call's deadline passed while the host worked on the sandbox's behalf."""


class Fatal(Exception):
    """Ends a call with a violation that stops the candidate."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class JailedProcess:
    NAME = "the sandbox process"  # how its death is told

    def __init__(self, limits: SandboxLimits, fork_server: ForkServer):
        self.limits = limits
        self._fork_server = fork_server
        self._zygote: ZygoteHandle | None = None
        self.pid: int | None = None  # the keeper's pid in the fork server's namespace
        self.host_pid: int | None = None  # the process's pid here, from the kernel
        self._pidfd: int | None = None
        self._sock: socket.socket | None = None
        self._dead: Outcome | None = None
        self._calls = 0
        self.layers: list[str] = []
        self.missing_layers: dict[str, str] = {}
        self.exit_status: dict[str, Any] | None = None

    def close(self) -> None:
        if self._sock is not None:
            self._kill()  # it sits frozen or idle between calls: nothing to say goodbye to

    def _spawn(self, role: dict[str, Any], deadline: float, failed: str) -> None:
        """Fork it under its limits (and ``role``'s settings) and take its layers. Raises ``SandboxStartError``
        (``failed``, why, and how it ended: the host's failure, never the program's) or ``SandboxUnavailable``
        (a layer ``limits.require`` names is missing here)."""
        try:
            self._zygote, self.pid, self._sock = self._fork_server.spawn(
                {**self.limits.model_dump(mode="json"), **role})
            self._receive_layers(deadline)
        except (SandboxStartError, TimeoutError, OSError, ProtocolError, wire.ChannelClosed) as exc:
            self._kill()
            raise SandboxStartError(
                f"{failed}: {type(exc).__name__}: {exc}; it ended with {self.exit_status}") from None
        required = {layer: reason for layer, reason in self.missing_layers.items() if layer in self.limits.require}
        if required:
            self._kill()
            raise SandboxUnavailable(required)

    def _receive_layers(self, deadline: float) -> None:
        """The first frame, sent by the sandbox's own code before the program: its layers, and (from the
        kernel) its pid, which the host then holds as a pidfd and checks the layers against."""
        assert self._sock is not None
        self._sock.settimeout(max(0.001, deadline - time.monotonic()))
        header, pid = receive_with_pid(self._sock, wire.HEADER.size)
        if len(header) < wire.HEADER.size:
            header += self._read_exact(wire.HEADER.size - len(header), deadline) if header else b""
        if not header:
            raise wire.ChannelClosed("the sandbox process exited while setting up")
        (length,) = wire.HEADER.unpack(header)
        if length > wire.MAX_FRAME_BYTES:
            raise ProtocolError("oversized layers frame")
        frame = parse_frame(self._read_exact(length, deadline))
        if not isinstance(frame, LayersFrame) or pid is None:
            raise ProtocolError(f"expected the layers frame with credentials first, got {type(frame).__name__}")
        self.host_pid = pid
        self._pidfd = os.pidfd_open(pid)
        self.layers = ([self._fork_server.jail] if self._fork_server.jail else []) + list(frame.layers)
        self.missing_layers = {**self._fork_server.missing, **frame.missing}
        self._verify_from_outside()

    def _verify_from_outside(self) -> None:
        """What /proc shows of the candidate must match what it reported (Landlock shows nothing there)."""
        try:
            assert self.host_pid is not None and self._zygote is not None  # start() set both before the layers came
            status = proc_status(self.host_pid)
            theirs = namespaces_of(self.host_pid)
        except OSError:
            return  # gone already: the load call reports how it ended
        caps = any(int(status[key], 16) for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"))
        checks = {
            "seccomp": status.get("Seccomp", "").strip() == "2",
            "capabilities": not caps,
            "namespaces": not self._zygote.namespaces or all(
                theirs[ns] != self._zygote.namespaces.get(ns) for ns in ("user", "mnt", "pid", "net", "ipc")),
        }
        for layer, holds in checks.items():
            if not holds and layer not in self.missing_layers:
                self.missing_layers[layer] = "reported by the sandbox but not seen from outside in /proc"

    def _signal(self, sig: int) -> None:
        if self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except ProcessLookupError:
                pass

    def _kill(self) -> None:
        """SIGKILL the candidate and reap its keeper (which the zygote reaps only when asked, so the pid
        cannot be reused before)."""
        if self.pid is not None and self.exit_status is None and self._zygote is not None:
            try:
                if self._pidfd is not None:
                    self._signal(signal.SIGKILL)
                else:
                    self._zygote.kill(self.pid)  # the candidate dies with its keeper
                self.exit_status = self._zygote.reap(self.pid)
            except (OSError, SandboxStartError, json.JSONDecodeError):
                self.exit_status = {"exitcode": None}
        self._release()

    def _release(self) -> None:
        """Close the handles on a killed process: its pidfd and its channel."""
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _send(self, message: dict[str, Any], deadline: float) -> None:
        assert self._sock is not None
        self._sock.settimeout(max(0.001, deadline - time.monotonic()))
        wire.send(self._sock, message)

    def _read_exact(self, n: int, deadline: float) -> bytes:
        assert self._sock is not None
        chunks = bytearray()
        while len(chunks) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self._sock.settimeout(remaining)
            chunk = self._sock.recv(min(n - len(chunks), 1 << 20))
            if not chunk:
                raise wire.ChannelClosed("sandbox closed the channel")
            chunks += chunk
        return bytes(chunks)

    def _recv(self, deadline: float) -> AnyFrame:
        (length,) = wire.HEADER.unpack(self._read_exact(wire.HEADER.size, deadline))
        if length > wire.MAX_FRAME_BYTES:
            raise ProtocolError(f"frame of {length} bytes exceeds the limit")
        frame = parse_frame(self._read_exact(length, deadline))
        if time.monotonic() > deadline:
            raise Overtime  # the host's own decoding counts against the call, like the candidate's work
        return frame

    def _fatal(self, kind: str, message: str, started: float, llm_calls: int) -> Outcome:
        self._kill()
        outcome = Outcome(ok=False, kind=kind, message=message, seconds=time.monotonic() - started, llm_calls=llm_calls)
        self._dead = outcome
        return outcome

    def _death_kind(self) -> str:
        sig: int | None = (self.exit_status or {}).get("signal")
        kinds: dict[int | None, str] = {signal.SIGXCPU: "cpu", signal.SIGXFSZ: "file_size", signal.SIGSYS: "forbidden"}
        return kinds.get(sig, "crashed")

    def _death_message(self, what: str) -> str:
        status = self.exit_status or {}
        if status.get("signal") is not None:
            sig = signal.Signals(status["signal"]).name
            cause = {
                "SIGXCPU": f"it exceeded its CPU-time limit ({self.limits.cpu_seconds} s)",
                "SIGXFSZ": "it exceeded its file-size limit",
                "SIGSYS": "it made a forbidden system call",
                "SIGKILL": "it was killed (out of memory?)",
            }.get(sig, "it crashed")
            return f"{self.NAME} died of {sig} during {what}(): {cause}"
        return f"{self.NAME} exited with code {status.get('exitcode')} during {what}()"
