"""Process-level isolation applied to a freshly forked candidate, before any of its code runs.

Each layer is applied where the machine allows it and reported by name, so the host can say exactly
what protected a run: death with its keeper, resource limits, a process state reset to the fork
server's recorded one (limits, priority, affinity, signal dispositions and mask, no inherited file
descriptors), a network namespace when the candidate has no namespaces of its own, and Landlock, which
confines the file system (reads to the interpreter's own files, writes to the candidate's folder)
beneath the mount view. The system-call filter is ``sandbox.seccomp``.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import struct
from typing import Any

from .libc import check, libc
from .namespaces import CLONE_NEWNET, CLONE_NEWUSER

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38


def die_with_parent() -> None:
    """SIGKILL this process when the process that forked it dies, so no sandbox outlives its keeper."""
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


def isolate_network() -> str:
    """Move into a new, empty network namespace (when the candidate has no namespaces of its own).

    As root a plain CLONE_NEWNET works; otherwise an unprivileged user namespace makes it possible
    where the kernel allows that. Raises OSError when neither is permitted.
    """
    if libc.unshare(CLONE_NEWNET) == 0:
        return "netns"
    first = ctypes.get_errno()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        return "netns(userns)"
    raise OSError(first, f"unshare(CLONE_NEWNET): {os.strerror(first)}")


# The limits the fork server checks on itself before every fork (another process may change them with
# prlimit) and every candidate sets afresh.
RLIMITS = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_MEMLOCK",
           "RLIMIT_MSGQUEUE", "RLIMIT_NICE", "RLIMIT_RTPRIO", "RLIMIT_STACK", "RLIMIT_NPROC", "RLIMIT_SIGPENDING")


def process_state() -> dict[str, Any]:
    """What another process could change about this one from outside: limits, priority, CPUs, policy."""
    return {
        "rlimits": {name: list(resource.getrlimit(getattr(resource, name))) for name in RLIMITS},
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "affinity": sorted(os.sched_getaffinity(0)),
        "policy": os.sched_getscheduler(0),
    }


def apply_rlimits(memory_mb: int, cpu_seconds: int, file_size_mb: int, max_open_files: int, max_tasks: int) -> list[str]:
    """Set each limit to exactly its value (soft = hard), never to whatever a neighbour left.

    RLIMIT_NPROC counts the tasks (threads and processes) of this uid in this process's user namespace
    (Linux >= 5.14 counts it per namespace): in the candidate's own namespace, only the candidate's and its
    keeper's, so thousands of threads parked in one call hit the cap, not the machine's pid_max."""
    limits = {
        "RLIMIT_AS": memory_mb * 1024 * 1024,
        "RLIMIT_CPU": cpu_seconds,
        "RLIMIT_FSIZE": file_size_mb * 1024 * 1024,
        "RLIMIT_NOFILE": max_open_files,
        "RLIMIT_CORE": 0,
        "RLIMIT_MEMLOCK": 0,
        "RLIMIT_MSGQUEUE": 0,
        "RLIMIT_RTPRIO": 0,
        "RLIMIT_NPROC": max_tasks,
    }
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))
    return [name for name in limits if name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE",
                                                 "RLIMIT_NPROC")]


def reset_process_state(baseline: dict[str, Any], keep_fd: int) -> str:
    """Priority, CPUs and scheduling policy back to the fork server's recorded ones, default signal
    dispositions (Python's own for SIGPIPE, SIGXFSZ and SIGINT), no blocked signals, and no file
    descriptor but stdio and ``keep_fd``."""
    if os.getpriority(os.PRIO_PROCESS, 0) != baseline["nice"]:
        os.setpriority(os.PRIO_PROCESS, 0, baseline["nice"])
    if sorted(os.sched_getaffinity(0)) != baseline["affinity"]:
        os.sched_setaffinity(0, baseline["affinity"])
    if os.sched_getscheduler(0) != baseline["policy"]:
        os.sched_setscheduler(0, baseline["policy"], os.sched_param(0))
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass  # the real-time signals the C library reserves
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    os.closerange(3, keep_fd)
    os.closerange(keep_fd + 1, 1 << 16)
    return "process-state-reset"


# --- Landlock ----------------------------------------------------------------------------------
# The file-system layer the audit hook cannot be: it also binds native code (SQLite's ATTACH, Rust
# inside ChromaDB). Reads are limited to the interpreter's files and this process's own /proc entry,
# every change to the sandbox folder. Later ABIs add TCP and signal/abstract-socket scoping.

_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ABI1_ALL = (1 << 13) - 1
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


def _landlock_abi() -> int:
    abi: int = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
    if abi < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"Landlock unavailable: {os.strerror(err)}")
    return abi


def restrict_filesystem(workdir: str, read_paths: list[str]) -> str:
    """Allow reads beneath ``read_paths`` and everything beneath ``workdir``; deny all else."""
    abi = _landlock_abi()
    handled_fs = _FS_ABI1_ALL
    if abi >= 2:
        handled_fs |= _FS_REFER
    if abi >= 3:
        handled_fs |= _FS_TRUNCATE
    if abi >= 5:
        handled_fs |= _FS_IOCTL_DEV
    handled_net = _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("QQQ", handled_fs, handled_net, scoped)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, attr[:size], size, 0)
    if ruleset < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        rules = [(path, _FS_READ_FILE | _FS_READ_DIR) for path in read_paths]
        rules.append((workdir, handled_fs))
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path this machine does not have
            try:
                if not os.path.isdir(path):
                    rights &= _FILE_RIGHTS
                rule = struct.pack("=Qi", rights & handled_fs, fd)
                check(libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, rule, 0),
                       f"landlock_add_rule({path})")
            finally:
                os.close(fd)
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        check(libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return f"landlock(abi {abi})"
