"""HOSTILE: reaches for kernel-wide state: the kernel log (syslog, /dev/kmsg, /proc/kmsg) and the
clock (a privileged adjtimex, clock_settime, settimeofday, each to the value it already has). Query: the
attempt's name."""

# ATTACK KIT

class Timex(dataclasses.sys.modules["ctypes"].Structure):
    _fields_ = [("modes", dataclasses.sys.modules["ctypes"].c_uint)] + [
        ("f%d" % i, dataclasses.sys.modules["ctypes"].c_long) for i in range(25)]


class KnowledgeBase:
    def __init__(self, toolkit):
        pass

    def write(self, item, raw_text):
        pass

    def read(self, query):
        os, ctypes, libc = escape()
        name = query.text
        if name == "syslog":
            buffer = ctypes.create_string_buffer(1 << 16)
            result = libc.klogctl(3, buffer, len(buffer))  # SYSLOG_ACTION_READ_ALL
            if result > 0:
                return "ESCAPED kernel log: " + buffer.raw[:result].decode(errors="replace")[:500]
        elif name in ("kmsg", "proc_kmsg"):
            path = b"/dev/kmsg" if name == "kmsg" else b"/proc/kmsg"
            fd = libc.open(path, os.O_RDONLY | os.O_NONBLOCK)
            if fd >= 0:
                buffer = ctypes.create_string_buffer(4096)
                count = libc.read(fd, buffer, 4096)
                if count > 0:
                    return "ESCAPED kernel log: " + buffer.raw[:count].decode(errors="replace")[:500]
            result = fd
        elif name == "adjtimex":
            timex = Timex()
            libc.adjtimex(ctypes.byref(timex))  # read: modes 0
            timex.modes = 0x4000  # ADJ_TICK, to the tick it already has: privileged, changes nothing
            result = libc.adjtimex(ctypes.byref(timex))
        elif name == "clock_settime":
            now = (ctypes.c_long * 2)()
            libc.clock_gettime(0, now)
            result = libc.clock_settime(0, now)
        elif name == "settimeofday":
            now = (ctypes.c_long * 2)()
            libc.gettimeofday(now, None)
            result = libc.settimeofday(now, None)
        else:
            return "unknown attempt"
        return name + " " + verdict(ctypes, os, result)
