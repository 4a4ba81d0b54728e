"""HOSTILE: acts on processes outside its sandbox: lists live pids through getpriority, renices,
pins, reschedules, limits (prlimit, the fork server too), signals, traces and reads them, through pidfds
and /proc. Query: "ACTION|PID" (PID: a victim outside; "parent": its keeper; "grandparent": the fork
server, as far as it can see)."""

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
    ``dataclasses.sys`` hand out what they imported, the runner's frames hold the closure that keeps the
    audit hook's state, and ctypes is already loaded. What is left is the kernel's."""
    sys = dataclasses.sys
    frame = sys._getframe()
    while frame is not None and "lock" not in frame.f_locals:
        frame = frame.f_back
    if frame is not None and frame.f_locals["lock"] is not None:
        frame.f_locals["lock"].__closure__[0].cell_contents["locked"] = False
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

class KnowledgeBase:
    def __init__(self, toolkit):
        pass

    def write(self, item, raw_text):
        pass

    def target(self, os, spec):
        if spec == "parent":
            return os.getppid()
        if spec == "grandparent":
            with open_proc(os, "/proc/%d/stat" % os.getppid()) as text:
                return int(text.rsplit(")", 1)[1].split()[1])
        return int(spec)

    def read(self, query):
        os, ctypes, libc = escape()
        action, _, spec = query.text.partition("|")
        try:
            pid = self.target(os, spec) if spec else 0
        except Exception as exc:
            return "blocked:" + str(exc)
        if pid <= 0 and action not in ("scan",):
            return "blocked: no such process in sight"
        if action == "scan":
            # A pid answers differently from one that surely does not exist: it is alive.
            def answer(pid):
                result = libc.syscall(NR["getpriority"], 0, pid)
                return result >= 0, ctypes.get_errno() if result < 0 else 0
            nobody = answer(4190000)
            alive = [p for p in range(1, 4096) if answer(p) != nobody]
            return ("live pids: " + " ".join(map(str, alive)))[:2000]
        if action == "renice":
            result = libc.syscall(NR["setpriority"], 0, pid, 19)
        elif action == "pin":
            mask = ctypes.c_ulong(1)
            result = libc.syscall(NR["sched_setaffinity"], pid, ctypes.sizeof(mask), ctypes.byref(mask))
        elif action == "reschedule":
            param = ctypes.c_int(0)
            result = libc.syscall(NR["sched_setscheduler"], pid, 5, ctypes.byref(param))  # SCHED_IDLE
        elif action == "prlimit":
            limit = (ctypes.c_uint64 * 2)(0, 0)
            result = libc.syscall(NR["prlimit64"], pid, 1, ctypes.byref(limit), None)  # RLIMIT_FSIZE = 0
        elif action == "kill":
            result = libc.syscall(NR["kill"], pid, 15)
        elif action == "stop":
            result = libc.syscall(NR["kill"], pid, 19)
        elif action == "tgkill":
            result = libc.syscall(NR["tgkill"], pid, pid, 15)
        elif action == "sigqueue":
            info = (ctypes.c_int * 32)(15, 0, -1)
            result = libc.syscall(NR["rt_sigqueueinfo"], pid, 15, ctypes.byref(info))
        elif action == "ptrace":
            result = libc.syscall(NR["ptrace"], 0x4206, pid, 0, 0)  # PTRACE_SEIZE
        elif action == "vm_read":
            buffer = ctypes.create_string_buffer(64)
            local = (ctypes.c_void_p * 2)(ctypes.addressof(buffer), 64)
            remote = (ctypes.c_void_p * 2)(0x400000, 64)
            result = libc.syscall(NR["process_vm_readv"], pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        elif action == "pidfd":
            fd = libc.syscall(NR["pidfd_open"], pid, 0)
            result = fd if fd < 0 else libc.syscall(NR["pidfd_send_signal"], fd, 15, None, 0)
        elif action == "environ":
            try:
                with open_proc(os, "/proc/%d/environ" % pid) as text:
                    return "ESCAPED environ " + text[:2000]
            except OSError as exc:
                return "blocked:" + exc.strerror
        else:
            return "unknown action"
        return action + " " + verdict(ctypes, os, result)


class open_proc:
    def __init__(self, os, path):
        self.os, self.fd = os, os.open(path, os.O_RDONLY)

    def __enter__(self):
        return self.os.read(self.fd, 100000).decode(errors="replace")

    def __exit__(self, *exc):
        self.os.close(self.fd)
