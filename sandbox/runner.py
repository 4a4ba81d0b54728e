"""The sandbox process's main loop: isolate this process, load the program, serve write/read calls.

Runs in a child forked by ``sandbox.zygote``. Messages from the host:
``{"op": "load", "source"}``, ``{"op": "write", "item", "raw_text"}``, ``{"op": "read", "query"}``,
``{"op": "feedback", "query", "score"}`` (only for programs that define ``feedback``).
Each is answered by exactly one ``{"op": "done", ...}`` frame; while a call runs, this side may send
``llm``/``embed`` requests (answered by the host) and ``violation`` notices (not answered).
"""

from __future__ import annotations

import _thread
import os
import socket
import sys
import time
import traceback
import types
from typing import Any

from sandbox import guard, oslayers, wire
from sandbox.toolkit import Toolkit

PROGRAM_FILENAME = "program.py"
THREAD_GRACE_S = 0.25


def _program_traceback(exc: BaseException) -> str:
    """The traceback restricted to the program's own frames: the harness's frames say nothing useful."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == PROGRAM_FILENAME]
    text = "".join(traceback.format_list(frames[-8:]))
    return (text + "".join(traceback.format_exception_only(type(exc), exc)))[-4000:]


class Session:
    def __init__(self, sock: socket.socket, workdir: str):
        self.sock = sock
        self.workdir = workdir
        self.violations: list[dict[str, str]] = []
        self.kb: Any = None
        self.classes: dict[str, Any] = {}
        self.toolkit = Toolkit(self.ask, workdir)

    # -- channel ---------------------------------------------------------------------------------

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        wire.send(self.sock, request)
        return wire.recv(self.sock)

    def report_violation(self, event: str, detail: str) -> None:
        notice = {"op": "violation", "kind": "forbidden", "event": event, "detail": detail}
        self.violations.append(notice)
        wire.send(self.sock, notice)

    # -- calls -----------------------------------------------------------------------------------

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message["op"]
        threads_before = _thread._count()
        try:
            if op == "load":
                value = self.load(message["source"])
            elif op == "write":
                value = self.write(message["item"], message["raw_text"])
            elif op == "read":
                value = self.read(message["query"])
            elif op == "feedback":
                value = self.feedback(message["query"], message["score"])
            else:
                return {"op": "done", "ok": False, "kind": "protocol", "message": f"unknown op {op!r}"}
        except MemoryError:
            return {"op": "done", "ok": False, "kind": "memory", "message": "the program exceeded its memory limit"}
        except RecursionError as exc:
            return self.failure("recursion", exc)
        except guard.SandboxViolation as exc:
            return self.failure("forbidden", exc)
        except _HarnessError as exc:
            return {"op": "done", "ok": False, "kind": exc.kind, "message": str(exc)}
        except BaseException as exc:  # the program's own error, whatever it raised
            return self.failure("exception", exc)
        result: dict[str, Any] = {"op": "done", "ok": True, "value": value}
        threads_after = self._threads_settled(threads_before)
        if threads_after > threads_before:
            result = {
                "op": "done",
                "ok": False,
                "kind": "thread",
                "message": f"{threads_after - threads_before} thread(s) started by the program still running after {op}() returned",
            }
        return result

    def _threads_settled(self, before: int) -> int:
        """Python threads still running, after a short grace for one that is just finishing. Only Python
        threads count: a program cannot start any other kind (no native code), while the toolkit's
        libraries start native ones of their own (ChromaDB's runtime) whenever they like."""
        deadline = time.monotonic() + THREAD_GRACE_S
        count = _thread._count()
        while count > before and time.monotonic() < deadline:
            time.sleep(0.01)
            count = _thread._count()
        return count

    def failure(self, kind: str, exc: BaseException) -> dict[str, Any]:
        return {
            "op": "done",
            "ok": False,
            "kind": kind,
            "message": f"{type(exc).__name__}: {exc}"[:2000],
            "traceback": _program_traceback(exc),
        }

    def load(self, source: str) -> dict[str, Any]:
        # A registered module, because dataclasses looks the class's module up in sys.modules.
        module = types.ModuleType("program")
        module.__dict__.update(guard.program_namespace())
        sys.modules["program"] = module
        namespace = module.__dict__
        exec(compile(source, PROGRAM_FILENAME, "exec"), namespace)
        for name in ("KnowledgeItem", "Query", "KnowledgeBase"):
            if not isinstance(namespace.get(name), type):
                raise _HarnessError("contract", f"the program defines no class {name}")
        self.classes = namespace
        self.kb = namespace["KnowledgeBase"](self.toolkit)
        return {"loaded": True}

    def _build(self, class_name: str, fields: Any) -> Any:
        if not isinstance(fields, dict):
            raise _HarnessError("bad_input", f"{class_name} fields must be a JSON object")
        try:
            return self.classes[class_name](**fields)
        except TypeError as exc:
            raise _HarnessError("bad_input", f"cannot build {class_name}: {exc}") from None

    def write(self, item: Any, raw_text: str) -> None:
        self.kb.write(self._build("KnowledgeItem", item), raw_text)
        return None

    def read(self, query: Any) -> str:
        value = self.kb.read(self._build("Query", query))
        if not isinstance(value, str):
            raise _HarnessError("contract", f"read() returned {type(value).__name__}, not str")
        return value

    def feedback(self, query: Any, score: Any) -> None:
        method = getattr(self.kb, "feedback", None)
        if not callable(method):
            raise _HarnessError("contract", "the program defines no KnowledgeBase.feedback(query, score)")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise _HarnessError("bad_input", f"feedback score must be a number, not {type(score).__name__}")
        method(self._build("Query", query), float(score))
        return None


class _HarnessError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _quiet_stdio() -> None:
    """Point fds 0-2 at /dev/null: whatever the program prints goes nowhere and cannot fill a pipe."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def serve(sock: socket.socket, config: dict[str, Any]) -> int:
    """Entry point of a freshly forked sandbox child. Returns the exit code."""
    workdir = config["workdir"]
    layers: list[str] = []
    missing: dict[str, str] = {}
    oslayers.die_with_parent()
    layers.append("die-with-parent")
    os.setsid()
    _quiet_stdio()
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update({"HOME": workdir, "TMPDIR": workdir, "PATH": "/nonexistent"})
    layers += ["clean-env", "private-workdir", "stdio-detached"]
    try:
        layers.append(oslayers.isolate_network())
    except OSError as exc:
        missing["netns"] = str(exc)
    limits = config["limits"]
    layers += oslayers.apply_rlimits(
        limits["memory_mb"], limits["cpu_seconds"], limits["file_size_mb"], limits["max_open_files"]
    )
    session = Session(sock, workdir)
    lock = guard.install_audit_hook(workdir, session.report_violation)
    try:
        layers.append(oslayers.restrict_filesystem(workdir, guard.readable_roots()))
    except OSError as exc:
        missing["landlock"] = str(exc)
    try:
        layers.append(oslayers.install_seccomp())
    except OSError as exc:
        missing["seccomp"] = str(exc)
    lock()
    layers += ["audit-hook", "import-whitelist", "restricted-builtins"]
    sys.setrecursionlimit(2000)
    # Sent before any program code runs, so the host knows the layers even if loading never ends.
    wire.send(sock, {"op": "layers", "layers": layers, "missing": missing})

    while True:
        try:
            message = wire.recv(sock)
        except (wire.ChannelClosed, OSError):
            return 0
        if message["op"] == "close":
            return 0
        reply = session.handle(message)
        reply["logs"] = session.toolkit.logger.drain()
        try:
            wire.send(sock, reply)
        except (OSError, wire.FrameError) as exc:
            wire.send(sock, {"op": "done", "ok": False, "kind": "protocol", "message": str(exc)})
