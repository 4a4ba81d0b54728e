"""HOSTILE: the system calls that bypass or widen what a filter sees: io_uring, userfaultfd,
perf_event_open, bpf, keyctl, personality, memfd_create + execveat, kexec_load, init_module,
open_by_handle_at, iopl. Query: the call's name."""

# ATTACK KIT

class KnowledgeBase:
    def __init__(self, toolkit):
        pass

    def write(self, item, raw_text):
        pass

    def read(self, query):
        os, ctypes, libc = escape()
        name = query.text
        buffer = ctypes.create_string_buffer(256)
        if name == "io_uring_setup":
            result = libc.syscall(NR["io_uring_setup"], 8, buffer)
        elif name == "userfaultfd":
            result = libc.syscall(NR["userfaultfd"], 0)
        elif name == "perf_event_open":
            result = libc.syscall(NR["perf_event_open"], buffer, 0, -1, -1, 0)
        elif name == "bpf":
            result = libc.syscall(NR["bpf"], 0, buffer, 48)
        elif name == "keyctl":
            result = libc.syscall(NR["keyctl"], 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of the user keyring
        elif name == "personality":
            result = libc.syscall(NR["personality"], 0x0040000)  # ADDR_NO_RANDOMIZE
        elif name == "memfd_execveat":
            fd = libc.syscall(NR["memfd_create"], b"x", 0)
            if fd < 0:
                result = fd
            else:
                os.write(fd, open_self_exe(os))
                argv = (ctypes.c_char_p * 2)(b"x", None)
                result = libc.syscall(NR["execveat"], fd, b"", argv, argv, 0x1000)  # AT_EMPTY_PATH
        elif name == "kexec_load":
            result = libc.syscall(NR["kexec_load"], 0, 0, None, 0)
        elif name == "init_module":
            result = libc.syscall(NR["init_module"], buffer, 16, b"")
        elif name == "open_by_handle_at":
            result = libc.syscall(NR["open_by_handle_at"], -100, buffer, 0)
        elif name == "iopl":
            result = libc.syscall(NR.get("iopl", -1), 3)
        else:
            return "unknown call"
        return name + " " + verdict(ctypes, os, result)


def open_self_exe(os):
    fd = os.open("/proc/self/exe", os.O_RDONLY)
    try:
        return os.read(fd, 1 << 20)
    finally:
        os.close(fd)
