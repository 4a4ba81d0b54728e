"""The sandbox process's main loop: isolate this process, load the program, serve write/read calls.

Runs in the candidate process the keeper forks (``sandbox.zygote``), or, for a spawn whose limits say
``"role": "store"``, in the program's Chroma process (``chroma_store``), under the same layers. Messages from
the host, each with the host's call number: ``{"op": "load", "call", "source"}``, ``{"op": "write", "call",
"item", "raw_text"}``, ``{"op": "read", "call", "query"}``, ``{"op": "feedback", "call", "query", "score"}`` (only
for programs that define ``feedback``), and, for a process started ``forking``, ``{"op": "fork", "call"}``
followed by one byte carrying a new channel (SCM_RIGHTS): this process forks a reader, a copy of its
post-write state that sends its own ``layers`` frame on that channel and answers reads there; the host ends
each process when it is done with it.
First, before any program code runs, this side sends one ``layers`` frame; then each call is answered
by exactly one ``done`` frame; while a call runs, this side may send ``llm``/``embed``/``chroma`` requests
(each answered by one ``reply``) and ``violation`` notices (not answered). Everything here after the program
loads is the program's to tamper with, so the host checks every frame it receives and decides nothing
on this side's word.
"""

from __future__ import annotations

import _thread
import contextlib
import errno
import os
import signal
import socket
import sqlite3
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

from . import chroma_store, guard, namespaces, oslayers, seccomp, wire
from .libc import libc
from .toolkit import Toolkit

PROGRAM_FILENAME = "program.py"
THREAD_GRACE_S = 0.25
# What the candidate's namespaces give it, reported as one layer.
NAMESPACES_LAYER = "namespaces(user, mount, pid, net, ipc, uts)"


def _program_traceback(exc: BaseException) -> str:
    """The traceback restricted to the program's own frames: the harness's frames say nothing useful."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == PROGRAM_FILENAME]
    text = "".join(traceback.format_list(frames[-8:]))
    return (text + "".join(traceback.format_exception_only(type(exc), exc)))[-4000:]


def _storage_kind(exc: BaseException) -> str | None:
    """"disk" for a full folder, "file_size" for a file over its limit (Python ignores SIGXFSZ)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "disk"
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return "file_size"
    if "database or disk is full" in str(exc):
        return "disk"
    return None


class Session:
    def __init__(self, sock: socket.socket, workdir: str):
        self.sock = sock
        self.workdir = workdir
        self.call: int | None = None
        self.guarded = True
        self.kb: Any = None
        self.classes: dict[str, Any] = {}
        self.toolkit = Toolkit(self.ask, workdir)
        self.max_tasks = 0
        self.tasks_refused = 0
        self.hook: guard.AuditHook | None = None
        self.layers: list[str] = []
        self.forking = False  # may fork readers (the host asked for them and the filter allows it)
        self.is_reader = False
        self.databases: list[sqlite3.Connection] = [self.toolkit.db]  # every SQLite connection opened here

    def track_databases(self) -> None:
        """Note every SQLite connection the program opens, so that a reader can make each one its own."""
        def hook(event: str, args: tuple[Any, ...]) -> None:
            if event == "sqlite3.connect/handle":
                self.databases.append(args[0])

        sys.addaudithook(hook)

    def _private_databases(self) -> None:
        """In a reader: every database becomes an in-memory copy of itself, so what this read writes stays in
        this reader (a fork shares the files, not just memory). One that cannot be copied is made read-only."""
        for db in self.databases:
            try:
                db.deserialize(db.serialize())
            except sqlite3.ProgrammingError:
                continue  # closed
            except sqlite3.Error:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("PRAGMA query_only = ON")

    def watch_task_cap(self, max_tasks: int) -> None:
        """Count the thread starts the kernel's task cap (RLIMIT_NPROC) refuses: every Python thread starts
        through ``_thread.start_new_thread`` (``threading`` keeps its own reference), so a program that
        swallows the error is still reported. The cap itself is the kernel's; this only names it."""
        self.max_tasks = max_tasks
        start = _thread.start_new_thread

        def start_new_thread(*args: Any, **kwargs: Any) -> int:
            try:
                return start(*args, **kwargs)
            except RuntimeError:
                self.tasks_refused += 1
                raise

        _thread.start_new_thread = start_new_thread
        threading._start_new_thread = start_new_thread  # type: ignore[attr-defined]  # private: not in the stdlib stubs

    # -- channel ---------------------------------------------------------------------------------

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        wire.send(self.sock, {**request, "call": self.call})
        return wire.recv(self.sock)

    def report_violation(self, event: str, detail: str) -> None:
        wire.send(self.sock, {"op": "violation", "call": self.call, "event": event, "detail": detail[:1000]})

    # -- calls -----------------------------------------------------------------------------------

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        self.tasks_refused = 0
        reply = self._handle(message)
        if self.tasks_refused:
            # Whether the program swallowed the refusal or not: it ran into its cap.
            return {"op": "done", "ok": False, "kind": "tasks",
                    "message": f"the program reached its cap of {self.max_tasks} tasks (threads and processes): "
                    f"{self.tasks_refused} thread start(s) refused during {message.get('op')}()"}
        return reply

    def _handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message.get("op")
        threads_before = _thread._count()
        value: dict[str, Any] | str | None
        try:
            if op == "load":
                value = self.load(message["source"])
            elif op == "write":
                self.write(message["item"], message["raw_text"])
                value = None
            elif op == "read":
                value = self.read(message["query"])
            elif op == "feedback":
                self.feedback(message["query"], message["score"])
                value = None
            elif op == "fork":
                self.fork_reader()
                value = None
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
            return self.failure(_storage_kind(exc) or "exception", exc)
        full = self._folder_full()
        if full:
            return {"op": "done", "ok": False, "kind": "disk", "message": full}
        threads_after = self._threads_settled(threads_before)
        if threads_after > threads_before:
            return {
                "op": "done",
                "ok": False,
                "kind": "thread",
                "message": f"{threads_after - threads_before} thread(s) started by the program still running after {op}() returned",
            }
        return {"op": "done", "ok": True, "value": value}

    def _folder_full(self) -> str:
        """A folder out of space or inodes breaks the contract even when the program swallowed the error."""
        try:
            stats = os.statvfs(self.workdir)
        except OSError:
            return ""
        if stats.f_blocks and stats.f_bavail == 0:
            return f"the program filled its folder ({stats.f_blocks * stats.f_frsize // 2**20} MB)"
        if stats.f_files and stats.f_favail == 0:
            return f"the program used all {stats.f_files:,} inodes of its folder"
        return ""

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
        module.__dict__.update(guard.program_namespace() if self.guarded else {"__name__": "program"})
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
        return str.__str__(value)  # a plain copy: a str subclass's own methods never run again

    def feedback(self, query: Any, score: Any) -> None:
        method = getattr(self.kb, "feedback", None)
        if not callable(method):
            raise _HarnessError("contract", "the program defines no KnowledgeBase.feedback(query, score)")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise _HarnessError("bad_input", f"feedback score must be a number, not {type(score).__name__}")
        method(self._build("Query", query), float(score))
        return None


    def _harness(self) -> contextlib.AbstractContextManager[None]:
        return self.hook.harness() if self.hook is not None else contextlib.nullcontext()

    def fork_reader(self) -> None:
        """Fork a reader: a copy of this process as the last call left it, serving reads on the channel that
        came with the request, then exiting. The host checked from outside that this process has one thread
        (a runtime with threads does not survive a fork); the reader answers each read from the same state."""
        if not self.forking or self.is_reader:
            raise _HarnessError("protocol", "this process does not fork readers")
        _, fds, _, _ = socket.recv_fds(self.sock, 1, 1)
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise _HarnessError("protocol", "no reader channel came with the fork request")
        with self._harness():
            try:
                pid = os.fork()
            except BlockingIOError:
                os.close(fds[0])
                raise _HarnessError("tasks", f"no reader could be forked: the program holds its cap of "
                                    f"{self.max_tasks} tasks (threads and processes)") from None
            if pid == 0:
                self.sock.close()
                self.sock = socket.socket(fileno=fds[0])
                self._private_databases()
        if pid:
            os.close(fds[0])
            return None
        self.is_reader = True
        try:
            wire.send(self.sock, {"op": "layers", "layers": self.layers, "missing": {}})
            serve_calls(self)
        finally:
            os._exit(0)


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


def serve(channel_fd: int, request: dict[str, Any], workdir: str, isolated: bool, missing: dict[str, str],
          baseline: dict[str, Any], disable: list[str]) -> int:
    """Entry point of a freshly forked candidate process (PID 1 of its namespaces when ``isolated``).
    Applies every layer, reports them, then serves the host until it closes the channel. Returns the exit code."""
    sock = socket.socket(fileno=channel_fd)
    limits = request["limits"]
    layers: list[str] = []
    oslayers.die_with_parent()
    layers.append("die-with-keeper")
    os.setsid()
    if isolated:
        layers.append(NAMESPACES_LAYER)
        try:
            layers += namespaces.mount_private(workdir, limits["disk_mb"], limits["disk_inodes"])
        except OSError as exc:
            missing["namespaces"] = f"own namespaces, but no bounded folder: {exc}"
    else:
        try:
            layers.append(oslayers.isolate_network())
        except OSError as exc:
            missing["netns"] = str(exc)
    layers += oslayers.apply_rlimits(
        limits["memory_mb"], limits["cpu_seconds"], limits["file_size_mb"], limits["max_open_files"], limits["max_tasks"]
    )
    layers.append(oslayers.reset_process_state(baseline, channel_fd))
    try:
        layers.append(namespaces.drop_capabilities())
    except OSError as exc:
        missing["capabilities"] = str(exc)
    libc.prctl(namespaces.PR_SET_DUMPABLE, 0, 0, 0, 0)
    _quiet_stdio()
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update({"HOME": workdir, "TMPDIR": workdir, "PATH": "/nonexistent"})
    layers += ["clean-env", "private-workdir", "stdio-detached"]
    if limits.get("role") == "store":
        return _serve_store(sock, workdir, layers, missing, disable)
    session = Session(sock, workdir)
    session.guarded = "python-guards" not in disable
    session.watch_task_cap(limits["max_tasks"])
    session.forking = bool(limits.get("fork_readers"))
    if session.forking:
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # readers reap themselves: no zombie holds a task
        session.track_databases()
        layers.append("fork-readers")
    hook = _close_in(workdir, session.report_violation, session.forking, disable, layers, missing)
    session.hook = hook
    # Sent before any program code runs: the host knows the layers even if loading never ends, and
    # learns this process's pid in its own namespace from the credentials the kernel attaches.
    session.layers = layers
    wire.send(sock, {"op": "layers", "layers": layers, "missing": missing})
    return serve_calls(session)


def _close_in(workdir: str, report: Callable[[str, str], None], forking: bool, disable: list[str],
              layers: list[str], missing: dict[str, str]) -> guard.AuditHook | None:
    """The last layers, which nothing before the program's first line may outlive: Landlock, the system-call
    filter and the audit hook, each named in ``layers`` or, if it could not be had, in ``missing``."""
    hook = guard.install_audit_hook(workdir, report) if "python-guards" not in disable else None
    apply: Callable[[], str]
    for name, apply in (("landlock", lambda: oslayers.restrict_filesystem(workdir, guard.readable_roots())),
                        ("seccomp", lambda: seccomp.install(forking))):
        if name in disable:
            missing[name] = "disabled (test mode)"
            continue
        try:
            layers.append(apply())
        except OSError as exc:
            missing[name] = str(exc)
    if hook is not None:
        hook.lock()
        layers += ["audit-hook", "import-whitelist", "restricted-builtins"]
    else:
        missing["python-guards"] = "disabled (test mode)"
    sys.setrecursionlimit(2000)
    return hook


def _serve_store(sock: socket.socket, workdir: str, layers: list[str], missing: dict[str, str],
                 disable: list[str]) -> int:
    """The program's Chroma process (``chroma_store``): the same layers as the program's own, then Chroma, then
    its requests. Chroma starts after the layers, so its threads start under them; one that cannot start ends
    this process before the layers frame, which the host reports as its own failure."""
    call: list[int | None] = [None]

    def report(event: str, detail: str) -> None:
        wire.send(sock, {"op": "violation", "call": call[0], "event": event, "detail": detail[:1000]})

    _close_in(workdir, report, False, disable, layers, missing)
    store = chroma_store.Store()
    layers.append("chroma-process")
    wire.send(sock, {"op": "layers", "layers": layers, "missing": missing})
    return chroma_store.serve(sock, store, call)


def serve_calls(session: Session) -> int:
    """Answer the host's calls on the session's channel until the host closes it."""
    sock = session.sock
    while True:
        try:
            message = wire.recv(sock)
        except (wire.ChannelClosed, wire.FrameError, OSError):
            return 0
        session.call = message.get("call")
        reply = session.handle(message)
        reply["call"] = session.call
        reply["logs"] = session.toolkit.logger.drain()
        try:
            wire.send(sock, reply)
        except (OSError, wire.FrameError) as exc:
            wire.send(sock, {"op": "done", "call": session.call, "ok": False, "kind": "protocol", "message": str(exc)})
