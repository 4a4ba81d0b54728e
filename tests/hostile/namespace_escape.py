"""HOSTILE: new namespaces of its own, another's namespaces (setns through /proc/1/ns), a clone
with namespace flags. Query: the attempt's name."""

# ATTACK KIT

class KnowledgeBase:
    def __init__(self, toolkit):
        pass

    def write(self, item, raw_text):
        pass

    def read(self, query):
        os, ctypes, libc = escape()
        name = query.text
        if name == "unshare_user":
            result = libc.syscall(NR["unshare"], 0x10000000)
        elif name == "unshare_mount":
            result = libc.syscall(NR["unshare"], 0x00020000)
        elif name == "setns":
            fd = libc.open(b"/proc/1/ns/mnt", os.O_RDONLY)
            result = fd if fd < 0 else libc.syscall(NR["setns"], fd, 0)
        elif name == "clone_newuser":
            result = libc.syscall(NR["clone"], 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD
            if result == 0:
                os._exit(0)
        elif name == "clone_thread_newns":
            result = libc.syscall(NR["clone"], 0x00010000 | 0x00000800 | 0x00000100 | 0x00020000, 0, 0, 0, 0)
        else:
            return "unknown attempt"
        return name + " " + verdict(ctypes, os, result)
