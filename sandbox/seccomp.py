"""The candidate process's system calls: an allow-list, default deny, as a classic-BPF seccomp filter.

Built by tracing what the seeds, SQLite, ChromaDB (with its Rust runtime) and numpy call once the program
runs (``tests/test_sandbox_seccomp.py`` replays that under the filter). Everything not listed fails with
EPERM, so a library probing an optional call degrades instead of dying; calls that only an escape would
make (tracing, mounts, namespaces, kernel log, clocks, BPF, keyrings, io_uring, pidfds, extended
attributes, module loading) kill the process, which the host reports as a forbidden system call.
Calls that name a process are allowed only towards this one, ``clone`` only for threads, ``ioctl`` and
``prctl`` only for the requests Python and the libraries use. A candidate whose reads run in readers forked
from its post-write state (``forking``) may also ``clone`` a plain fork (exactly the C library's flags: no
shared memory, no namespaces) and receive a reader's channel (``recvmsg``); its process count stays under
RLIMIT_NPROC and every process dies with its PID 1 (``docs/concepts/contract.md``).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import struct

from .libc import check, libc
from .namespaces import EVERY_NAMESPACE
from .syscalls import NUMBERS as NUMBERS  # re-exported: the zygote asks whether this machine has a filter

# Hot calls first: the filter is a linear scan (the kernel caches argument-free verdicts anyway).
ALLOWED = (
    "futex", "read", "write", "recvfrom", "sendto", "pread64", "pwrite64", "epoll_wait", "epoll_pwait",
    "epoll_pwait2", "mmap", "munmap", "mprotect", "madvise", "brk", "mremap", "lseek", "close", "fstat",
    "newfstatat", "statx", "openat", "fcntl", "sched_yield", "rt_sigprocmask", "rt_sigaction", "rt_sigreturn",
    # files (the mount view and Landlock decide which)
    "readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2", "getdents64", "dup", "dup3", "pipe2",
    "faccessat", "faccessat2", "readlinkat", "getcwd", "unlinkat", "renameat", "renameat2", "mkdirat",
    "ftruncate", "fsync", "fdatasync", "fallocate", "fadvise64", "flock", "umask", "statfs", "fstatfs",
    "close_range", "chdir", "fchdir",
    # x86_64's older spellings of the same
    "open", "stat", "lstat", "access", "readlink", "unlink", "rename", "mkdir", "rmdir", "dup2", "pipe",
    "getdents", "poll", "select", "epoll_create", "eventfd", "time", "getrlimit", "setrlimit",
    # memory, threads, time, identity
    "set_robust_list", "rseq", "set_tid_address", "membarrier", "get_mempolicy", "msync", "mincore",
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "getpid", "gettid",
    "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "getpgrp",
    "capget", "uname", "sysinfo", "getrandom", "getrusage", "times", "sigaltstack", "rt_sigpending",
    "rt_sigsuspend", "rt_sigtimedwait", "restart_syscall", "sched_get_priority_max", "sched_get_priority_min",
    "getcpu", "exit", "exit_group", "futex_waitv",
    # event loops of the ChromaDB runtime, and the already-open channel to the host
    "epoll_create1", "epoll_ctl", "eventfd2", "ppoll", "pselect6", "timerfd_create", "timerfd_settime",
    "timerfd_gettime", "shutdown", "getsockname", "getpeername", "getsockopt",
)
# Allowed when argument 0 is 0 (the caller) or this process's own pid.
SELF_ONLY = (
    "kill", "tgkill", "prlimit64", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_setparam",
    "sched_getscheduler", "sched_setscheduler", "sched_getattr", "sched_setattr", "sched_rr_get_interval",
)
# Allowed when ``which`` is PRIO_PROCESS and ``who`` is 0 or this process.
PRIORITY = ("getpriority", "setpriority")
KILLED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "process_mrelease", "kcmp",
    "mount", "umount2", "mount_setattr", "fsopen", "fspick", "fsconfig", "fsmount", "move_mount", "open_tree",
    "open_tree_attr", "pivot_root", "chroot", "setns", "unshare", "syslog", "adjtimex", "clock_adjtime",
    "settimeofday", "clock_settime", "bpf", "perf_event_open", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "keyctl", "add_key", "request_key", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "userfaultfd", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "name_to_handle_at",
    "open_by_handle_at", "iopl", "ioperm", "swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd",
    "lookup_dcookie", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    "setxattrat", "removexattrat", "execveat", "modify_ldt", "vhangup", "fanotify_init",
)
# TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO, FIONCLEX, FIOCLEX: isatty, terminal size, non-blocking and
# close-on-exec flags (the same numbers on both architectures). No TIOCSTI, no FS_IOC_SETFLAGS.
IOCTLS = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)
# PR_GET_PDEATHSIG, PR_GET_DUMPABLE, PR_SET_NAME (runtime threads name themselves), PR_GET_NAME,
# PR_GET_SECCOMP, PR_CAPBSET_READ, PR_GET_TIMERSLACK, PR_GET_NO_NEW_PRIVS, PR_SET_VMA (the C library
# names its anonymous mappings). Nothing that sets a death signal, dumpability, tracer or memory map.
PRCTLS = (2, 3, 15, 16, 21, 23, 30, 39, 0x53564D41)
AF_UNIX = 1
PRIO_PROCESS = 0
CLONE_THREAD = 0x00010000
# The C library's fork(): CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD, and nothing else.
FORK_FLAGS = 0x01200011
# What a forking candidate may call beyond ALLOWED: its host hands each reader's channel in with SCM_RIGHTS.
FORKING_ALLOWED = ("recvmsg",)

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
SECCOMP_SYSCALL = {"x86_64": 317, "aarch64": 277}
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
PR_SET_NO_NEW_PRIVS = 38

# classic BPF
LD_W_ABS, JEQ, JSET, JA, RET = 0x20, 0x15, 0x45, 0x05, 0x06
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_EPERM = 0x00050000 | errno.EPERM
RET_ENOSYS = 0x00050000 | errno.ENOSYS
OFF_NR, OFF_ARCH = 0, 4


def _arg(index: int) -> int:
    """Offset of the low 32 bits of argument ``index`` (little-endian): every argument checked here is an
    int, a pid or flags the kernel itself truncates to 32 bits."""
    return 16 + 8 * index


class _Program:
    """Instructions with symbolic jump targets. Conditional jumps only ever skip one instruction (a return
    or an unconditional jump), so no 8-bit offset can overflow however long the lists grow."""

    def __init__(self) -> None:
        self.code: list[tuple[int, int, int, int | str]] = []  # k: a value, or a label to jump to
        self.labels: dict[str, int] = {}

    def load(self, offset: int) -> None:
        self.code.append((LD_W_ABS, 0, 0, offset))

    def ret(self, action: int) -> None:
        self.code.append((RET, 0, 0, action))

    def jump(self, label: str) -> None:
        self.code.append((JA, 0, 0, label))

    def if_equal(self, value: int, then_ret: int | None = None, then_jump: str | None = None) -> None:
        self.code.append((JEQ, 0, 1, value))
        if then_jump is not None:
            self.jump(then_jump)
        elif then_ret is not None:
            self.ret(then_ret)
        else:
            raise ValueError("if_equal needs then_ret or then_jump")

    def if_any_bit(self, mask: int, then_ret: int) -> None:
        self.code.append((JSET, 0, 1, mask))
        self.ret(then_ret)

    def if_no_bit(self, mask: int, then_ret: int) -> None:
        self.code.append((JSET, 1, 0, mask))
        self.ret(then_ret)

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def resolve(self) -> list[tuple[int, int, int, int]]:
        out = []
        for index, (code, jt, jf, k) in enumerate(self.code):
            if isinstance(k, str):
                k = self.labels[k] - index - 1
            out.append((code, jt, jf, int(k)))
        return out


def build_filter(machine: str, own_pid: int, forking: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for ``machine``, with ``own_pid`` the pid this process
    sees for itself (1 in its own PID namespace); ``forking`` allows a plain fork and ``recvmsg``."""
    numbers = NUMBERS[machine]
    p = _Program()
    p.load(OFF_ARCH)
    p.code.append((JEQ, 1, 0, AUDIT_ARCH[machine]))
    p.ret(RET_KILL_PROCESS)
    p.load(OFF_NR)
    if machine == "x86_64":  # the x32 ABI reuses numbers with this bit set: never ours
        p.code.append((0x35, 0, 1, X32_SYSCALL_BIT))  # JGE
        p.ret(RET_KILL_PROCESS)
    for name in ALLOWED + (FORKING_ALLOWED if forking else ()):
        if name in numbers:
            p.if_equal(numbers[name], then_ret=RET_ALLOW)
    for name in KILLED:
        if name in numbers:
            p.if_equal(numbers[name], then_ret=RET_KILL_PROCESS)
    # clone3 keeps its flags in memory a filter cannot read: ENOSYS makes the C library use clone.
    p.if_equal(numbers["clone3"], then_ret=RET_ENOSYS)
    p.if_equal(numbers["clone"], then_jump="clone")
    for name in SELF_ONLY:
        p.if_equal(numbers[name], then_jump="self")
    for name in PRIORITY:
        p.if_equal(numbers[name], then_jump="priority")
    p.if_equal(numbers["ioctl"], then_jump="ioctl")
    p.if_equal(numbers["prctl"], then_jump="prctl")
    p.if_equal(numbers["socketpair"], then_jump="socketpair")
    p.ret(RET_EPERM)

    p.label("clone")
    p.load(_arg(0))
    if forking:
        p.if_equal(FORK_FLAGS, then_ret=RET_ALLOW)
    p.if_no_bit(CLONE_THREAD, RET_EPERM)
    p.if_any_bit(EVERY_NAMESPACE, RET_EPERM)  # never a thread in new namespaces
    p.ret(RET_ALLOW)
    p.label("self")
    p.load(_arg(0))
    p.if_equal(0, then_ret=RET_ALLOW)
    p.if_equal(own_pid, then_ret=RET_ALLOW)
    p.ret(RET_EPERM)
    p.label("priority")
    p.load(_arg(0))
    p.code.append((JEQ, 1, 0, PRIO_PROCESS))
    p.ret(RET_EPERM)
    p.load(_arg(1))
    p.if_equal(0, then_ret=RET_ALLOW)
    p.if_equal(own_pid, then_ret=RET_ALLOW)
    p.ret(RET_EPERM)
    p.label("ioctl")
    p.load(_arg(1))
    for request in IOCTLS:
        p.if_equal(request, then_ret=RET_ALLOW)
    p.ret(RET_EPERM)
    p.label("prctl")
    p.load(_arg(0))
    for option in PRCTLS:
        p.if_equal(option, then_ret=RET_ALLOW)
    p.ret(RET_EPERM)
    p.label("socketpair")
    p.load(_arg(0))
    p.if_equal(AF_UNIX, then_ret=RET_ALLOW)
    p.ret(RET_EPERM)
    return p.resolve()


@functools.lru_cache(maxsize=4)
def packed_filter(machine: str, own_pid: int, forking: bool = False) -> bytes:
    """The filter as the kernel reads it; the fork server builds the one for PID 1 once, before forking."""
    return b"".join(struct.pack("HBBI", *insn) for insn in build_filter(machine, own_pid, forking))


def install(forking: bool = False) -> str:
    """Install the filter on every thread of this process (no_new_privs first); returns the layer name."""
    machine = platform.machine()
    if machine not in NUMBERS:
        raise OSError(errno.ENOSYS, f"no seccomp system-call table for {machine} (x86_64 and aarch64 only)")
    raw = packed_filter(machine, os.getpid(), forking)
    buffer = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(raw) // 8, ctypes.addressof(buffer))
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    check(libc.syscall(SECCOMP_SYSCALL[machine], SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
                       ctypes.byref(fprog)), "seccomp(SECCOMP_SET_MODE_FILTER)")
    return "seccomp"
