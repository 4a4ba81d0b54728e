"""Interpreter-level guards: a restricted namespace for the program and a permanent audit hook.

The restricted builtins and import whitelist stop the obvious routes. They cannot stop a program that
climbs ``().__class__.__base__.__subclasses__()`` to modules this process already loaded (chromadb pulls
in socket, subprocess and ctypes), so a PEP 578 audit hook refuses the dangerous operations themselves,
whoever asks: new processes, sockets, native calls, files outside the work folder. An audit hook cannot
be removed once added, and its state lives only in closure cells, out of reach of the program's
objects. The kernel layers in ``sandbox.oslayers`` stand behind this one.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from .python_subset import ALLOWED_IMPORTS, FORBIDDEN_BUILTINS

# Importing these (by any route) is refused once the guard is locked.
DENIED_MODULES = frozenset(
    {
        "ctypes", "_ctypes", "cffi", "subprocess", "_posixsubprocess", "multiprocessing", "_multiprocessing",
        "socket", "_socket", "ssl", "_ssl", "pty", "mmap", "fcntl", "resource", "gc", "pdb", "code",
        "importlib", "_imp", "signal", "_signal", "urllib", "http", "asyncio", "selectors", "select",
    }
)
_PROCESS_EVENTS = frozenset(
    {"os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "subprocess.Popen",
     "pty.spawn", "os.startfile", "signal.pthread_kill", "resource.setrlimit", "resource.prlimit",
     "sys.settrace", "sys.setprofile", "gc.get_referrers", "gc.get_referents", "gc.get_objects",
     "sqlite3.enable_load_extension", "sqlite3.load_extension", "os.chroot", "os.setns", "os.unshare"}
)
_PATH_WRITE_EVENTS = frozenset(
    {"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.utime", "os.chdir",
     "os.chflags", "os.lchflags", "os.mkfifo", "os.mknod", "shutil.rmtree", "shutil.copyfile",
     "shutil.copymode", "shutil.copystat", "shutil.copytree", "shutil.move", "shutil.chown"}
)
_PATH_PAIR_EVENTS = frozenset({"os.rename", "os.link", "os.symlink"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class SandboxViolation(PermissionError):
    """Raised inside the program when it attempts something the sandbox forbids."""


def _within(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root + os.sep) for root in roots)


def _real(path: Any) -> str | None:
    if isinstance(path, int):
        return None
    try:
        return os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return "<unresolvable>"


def readable_roots() -> list[str]:
    """What a sandbox may read besides its own folder: the interpreter's own files, so that lazy imports
    of already-loaded libraries still work, the C library's loader cache, and its own /proc entry."""
    # Not every sys.path entry: an editable install puts the repository (and the run folders under it)
    # on the path, and a program has no business reading those.
    own_package = os.path.dirname(os.path.abspath(__file__))
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, own_package)}
    paths |= {os.path.realpath(p) for p in sys.path if "-packages" in p}
    paths |= {os.path.realpath("/proc/self"), "/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/share/zoneinfo",
              "/etc/localtime", "/etc/ld.so.cache", "/dev/null", "/dev/urandom", "/sys/devices/system/cpu"}
    return sorted(paths)


class AuditHook:
    """The installed hook's switches: ``lock()`` turns it on for good; ``harness()`` steps it aside while the
    sandbox's own code forks a reader and opens its channel (a lint-level exemption: the system-call filter
    and the kernel's limits are what bound a process that forks)."""

    def __init__(self, state: dict[str, bool]):
        self._state = state

    def lock(self) -> None:
        self._state["locked"] = True

    @contextlib.contextmanager
    def harness(self) -> Iterator[None]:
        self._state["harness"] = True
        try:
            yield
        finally:
            self._state["harness"] = False


def install_audit_hook(workdir: str, report: Callable[[str, str], None]) -> AuditHook:
    """Add the permanent hook (inactive until ``lock()`` is called on what it returns).

    ``report(event, detail)`` tells the host at once, so a program that catches the exception is still
    caught.
    """
    work_root = os.path.realpath(workdir)
    read_roots = tuple(sorted({work_root, *(os.path.realpath(p) for p in readable_roots())}))
    write_roots = (work_root, "/dev/null")
    state = {"locked": False, "reporting": False, "harness": False}

    def deny(event: str, detail: str) -> None:
        if not state["reporting"]:
            state["reporting"] = True
            try:
                report(event, detail)
            finally:
                state["reporting"] = False
        raise SandboxViolation(f"sandbox: {event} is not allowed ({detail})")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if not state["locked"] or state["reporting"] or state["harness"]:
            return
        if event in _PROCESS_EVENTS:
            deny(event, "no processes, tracing or limit changes in a sandbox")
        elif event.startswith("socket.") or event.startswith("ctypes."):
            deny(event, "no network and no native calls in a sandbox")
        elif event == "import":
            top = str(args[0]).split(".", 1)[0]
            if top in DENIED_MODULES:
                deny(event, f"module {args[0]!r}")
        elif event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            real = _real(path)
            if real is None:
                return
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if not _within(real, write_roots if writes else read_roots):
                deny(event, f"{'write' if writes else 'read'} {real!r} outside the sandbox folder")
        elif event in ("os.listdir", "os.scandir"):
            real = _real(args[0] if args else ".")
            if real is not None and not _within(real, read_roots):
                deny(event, f"list {real!r} outside the sandbox folder")
        elif event in _PATH_WRITE_EVENTS or event in _PATH_PAIR_EVENTS:
            paths = args[:2] if event in _PATH_PAIR_EVENTS else args[:1]
            for path in paths:
                real = _real(path)
                if real is not None and not _within(real, write_roots):
                    deny(event, f"change {real!r} outside the sandbox folder")
        elif event == "sqlite3.connect":
            database = args[0] if args else ""
            real = None if database in ("", ":memory:", b":memory:") else _real(database)
            if real is not None and not _within(real, write_roots):
                deny(event, f"database {real!r} outside the sandbox folder")
        elif event in ("os.kill", "os.killpg"):
            if event == "os.killpg" or args[0] != os.getpid():
                deny(event, "signals to other processes")

    sys.addaudithook(hook)
    return AuditHook(state)


def _guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    if level:
        raise ImportError("relative imports are not allowed in a memory program")
    if name.split(".", 1)[0] not in ALLOWED_IMPORTS:
        raise ImportError(f"import of {name!r} is not allowed in a memory program")
    return builtins.__import__(name, globals, locals, fromlist, level)


def program_namespace() -> dict[str, Any]:
    """Globals for executing a candidate module: whitelisted imports, no code-evaluating builtins."""
    safe = {k: v for k, v in vars(builtins).items() if k not in FORBIDDEN_BUILTINS}
    safe["__import__"] = _guarded_import
    return {"__name__": "program", "__builtins__": safe}
