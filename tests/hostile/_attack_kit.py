"""Shared by the hostile programs that attack the kernel's layers: what an attacker's program would carry
to leave the Python layers behind (``escape``), to report a system call's result (``verdict``), and the
numbers of the calls it makes. ``tests.sandbox_support.hostile_source`` puts it where a program says
``# ATTACK KIT``: a candidate is one file, so each program is sent whole."""

import dataclasses
import random
from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str


def escape():
    """Leave the Python layers behind, as a program written by an attacker would: ``random._os`` and
    ``dataclasses.sys`` hand out what they imported, the runner's frames hold the object that keeps the
    audit hook's state, and ctypes is already loaded. What is left is the kernel's."""
    sys = dataclasses.sys
    frame = sys._getframe()
    while frame is not None and "hook" not in frame.f_locals:
        frame = frame.f_back
    if frame is not None and frame.f_locals["hook"] is not None:
        frame.f_locals["hook"]._state["locked"] = False
    ctypes = sys.modules["ctypes"]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return random._os, ctypes, libc


def verdict(ctypes, os, result):
    """ESCAPED when the call succeeded, else the errno it failed with."""
    if isinstance(result, int) and result < 0:
        return "blocked:" + os.strerror(ctypes.get_errno())
    return "ESCAPED"


MACHINE = dataclasses.sys.modules["platform"].machine() if "platform" in dataclasses.sys.modules else "x86_64"
NR = {
    "x86_64": {"userfaultfd": 323, "perf_event_open": 298, "bpf": 321, "keyctl": 250, "kexec_load": 246,
               "init_module": 175, "iopl": 172, "syslog": 103, "adjtimex": 159, "clock_settime": 227,
               "ptrace": 101, "process_vm_readv": 310, "unshare": 272, "setns": 308, "clone": 56,
               "rt_sigqueueinfo": 129, "tgkill": 234, "memfd_create": 319, "execveat": 322, "personality": 135,
               "open_by_handle_at": 304, "prlimit64": 302, "setpriority": 141, "getpriority": 140,
               "sched_setaffinity": 203, "sched_setscheduler": 144, "mount": 165, "umount2": 166,
               "pivot_root": 155, "chroot": 161, "setxattr": 188, "fsetxattr": 190, "mknodat": 259,
               "socketpair": 53, "socket": 41, "ioctl": 16, "prctl": 157, "kill": 62, "settimeofday": 164},
    "aarch64": {"userfaultfd": 282, "perf_event_open": 241, "bpf": 280, "keyctl": 219, "kexec_load": 104,
                "init_module": 105, "syslog": 116, "adjtimex": 171, "clock_settime": 112, "ptrace": 117,
                "process_vm_readv": 270, "unshare": 97, "setns": 268, "clone": 220, "rt_sigqueueinfo": 138,
                "tgkill": 131, "memfd_create": 279, "execveat": 281, "personality": 92, "open_by_handle_at": 265,
                "prlimit64": 261, "setpriority": 140, "getpriority": 141, "sched_setaffinity": 122,
                "sched_setscheduler": 119, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
                "setxattr": 5, "fsetxattr": 7, "mknodat": 33, "socketpair": 199, "socket": 198, "ioctl": 29,
                "prctl": 167, "kill": 129, "settimeofday": 170},
}[MACHINE]
# The same number on every architecture (added after the tables were unified).
NR.update({"io_uring_setup": 425, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fspick": 433,
           "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438, "mount_setattr": 442})
