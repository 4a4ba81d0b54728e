"""Kernel-level isolation applied to a freshly forked sandbox process, before any candidate code runs.

Each layer is applied where the machine allows it and reported by name, so the host can say exactly
what protected a run: a new network namespace (no interfaces but a downed loopback), resource limits,
a seccomp filter that refuses new processes, new sockets, namespace changes and signals to other
processes, and death with the parent. Python 3.11 has no ``os.unshare`` or ``prctl``, hence libc via ctypes
here, in trusted code that runs before the program is loaded. Landlock confines the file system
(reads to the interpreter's own files, writes to the sandbox folder) beneath all of that.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
import resource
import signal
import struct

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_THREAD = 0x00010000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def die_with_parent() -> None:
    """SIGKILL this process when the process that forked it dies, so no sandbox outlives its host."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


def isolate_network() -> str:
    """Move into a new, empty network namespace; returns the layer name.

    As root a plain CLONE_NEWNET works; otherwise an unprivileged user namespace makes it possible
    where the kernel allows that. Raises OSError when neither is permitted.
    """
    if _libc.unshare(CLONE_NEWNET) == 0:
        return "netns"
    first = ctypes.get_errno()
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        return "netns(userns)"
    raise OSError(first, f"unshare(CLONE_NEWNET): {os.strerror(first)}")


def apply_rlimits(memory_mb: int, cpu_seconds: int, file_size_mb: int, max_open_files: int) -> list[str]:
    limits = {
        "RLIMIT_AS": (resource.RLIMIT_AS, memory_mb * 1024 * 1024),
        "RLIMIT_CPU": (resource.RLIMIT_CPU, cpu_seconds),
        "RLIMIT_FSIZE": (resource.RLIMIT_FSIZE, file_size_mb * 1024 * 1024),
        "RLIMIT_NOFILE": (resource.RLIMIT_NOFILE, max_open_files),
        "RLIMIT_CORE": (resource.RLIMIT_CORE, 0),
    }
    applied = []
    for name, (which, value) in limits.items():
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))
        applied.append(name)
    return applied


# --- seccomp -----------------------------------------------------------------------------------

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_SYSCALL_BIT = 0x40000000

# Syscalls refused with EPERM. Chosen to stop what the audit hook also stops (processes, sockets) and
# what no memory program needs but an escape would (namespaces, mounts, kernel modules, tracing,
# io_uring which bypasses seccomp for its operations).
_DENIED = {
    "x86_64": {
        "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "socket": 41, "ptrace": 101,
        "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "setns": 308, "unshare": 272,
        "reboot": 169, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
        "finit_module": 313, "delete_module": 176, "bpf": 321, "perf_event_open": 298, "keyctl": 250,
        "add_key": 248, "request_key": 249, "process_vm_readv": 310, "process_vm_writev": 311,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "userfaultfd": 323, "mknod": 133,
        "mknodat": 259, "swapon": 167, "swapoff": 168, "sethostname": 170, "setdomainname": 171,
        "settimeofday": 164, "clock_settime": 227, "acct": 163, "iopl": 172, "ioperm": 173,
        "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "pidfd_open": 434, "pidfd_send_signal": 424,
        "pidfd_getfd": 438, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsmount": 432,
    },
    "aarch64": {
        "execve": 221, "execveat": 281, "socket": 198, "ptrace": 117, "mount": 40, "umount2": 39,
        "pivot_root": 41, "chroot": 51, "setns": 268, "unshare": 97, "reboot": 142, "kexec_load": 104,
        "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "bpf": 280, "perf_event_open": 241, "keyctl": 219, "add_key": 217, "request_key": 218,
        "process_vm_readv": 270, "process_vm_writev": 271, "open_by_handle_at": 265,
        "name_to_handle_at": 264, "userfaultfd": 282, "mknodat": 33, "swapon": 224, "swapoff": 225,
        "sethostname": 161, "setdomainname": 162, "settimeofday": 170, "clock_settime": 112, "acct": 89,
        "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "pidfd_open": 434, "pidfd_send_signal": 424,
        "pidfd_getfd": 438, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsmount": 432,
    },
}
# clone is allowed only for threads; clone3 hides its flags in memory the filter cannot read, so it
# answers ENOSYS and the C library falls back to clone. kill/tkill/tgkill only towards this process.
_CLONE = {"x86_64": 56, "aarch64": 220}
_CLONE3 = 435
_SELF_SIGNAL = {"x86_64": (62, 200, 234), "aarch64": (129, 130, 131)}

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_EPERM = 0x00050000 | errno.EPERM
_RET_ENOSYS = 0x00050000 | errno.ENOSYS
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16


def _seccomp_program(machine: str, own_pid: int) -> list[tuple[int, int, int, int]]:
    """A classic-BPF filter as (code, jt, jf, k) tuples; jump targets resolved from labels."""
    insns: list[tuple[int, object, object, int]] = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        (_JEQ, 1, 0, _AUDIT_ARCH[machine]),
        (_RET, 0, 0, _RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if machine == "x86_64":
        insns.append((_JGE, "eperm", 0, _X32_SYSCALL_BIT))
    for nr in sorted(_DENIED[machine].values()):
        insns.append((_JEQ, "eperm", 0, nr))
    insns.append((_JEQ, "enosys", 0, _CLONE3))
    insns.append((_JEQ, "clone", 0, _CLONE[machine]))
    for nr in _SELF_SIGNAL[machine]:
        insns.append((_JEQ, "signal", 0, nr))
    insns.append((_RET, 0, 0, _RET_ALLOW))
    labels = {}
    labels["clone"] = len(insns)
    insns += [(_LD_W_ABS, 0, 0, _OFF_ARG0), (_JSET, "allow", "eperm", CLONE_THREAD)]
    labels["signal"] = len(insns)
    insns += [(_LD_W_ABS, 0, 0, _OFF_ARG0), (_JEQ, "allow", "eperm", own_pid)]
    labels["allow"] = len(insns)
    insns.append((_RET, 0, 0, _RET_ALLOW))
    labels["eperm"] = len(insns)
    insns.append((_RET, 0, 0, _RET_EPERM))
    labels["enosys"] = len(insns)
    insns.append((_RET, 0, 0, _RET_ENOSYS))

    resolved = []
    for index, (code, jt, jf, k) in enumerate(insns):
        def offset(target: object) -> int:
            if isinstance(target, str):
                delta = labels[target] - index - 1
                assert 0 <= delta < 256, "seccomp jump out of range"
                return delta
            return int(target)  # type: ignore[call-overload]

        resolved.append((code, offset(jt), offset(jf), k))
    return resolved


def install_seccomp() -> str:
    """Install the filter for this process and all its threads; returns the layer name."""
    machine = platform.machine()
    if machine not in _DENIED:
        raise OSError(errno.ENOSYS, f"no seccomp syscall table for {machine}")
    program = _seccomp_program(machine, os.getpid())
    raw = b"".join(struct.pack("HBBI", *insn) for insn in program)
    buffer = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(buffer))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "prctl(PR_SET_SECCOMP)")
    return "seccomp"


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
    abi = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
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
    ruleset = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, attr[:size], size, 0)
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
                _check(_libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, rule, 0),
                       f"landlock_add_rule({path})")
            finally:
                os.close(fd)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(_libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return f"landlock(abi {abi})"
