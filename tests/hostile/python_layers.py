"""HOSTILE: the Python layers are lint. Through module attributes (random._os, dataclasses.sys,
dataclasses._thread) and the runner's frames it switches the audit hook off, then reads, writes and lists
what it likes with os and ctypes. Query: "read|PATH", "write|PATH", "list|PATH", "libc_open|PATH",
"thread" (a thread started through dataclasses._thread)."""

# ATTACK KIT

class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit

    def write(self, item, raw_text):
        pass

    def read(self, query):
        os, ctypes, libc = escape()
        action, _, path = query.text.partition("|")
        try:
            if action == "read":
                fd = os.open(path, os.O_RDONLY)
                return "ESCAPED read " + os.read(fd, 2000).decode(errors="replace")
            if action == "write":
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
                os.write(fd, b"pwned")
                return "ESCAPED write"
            if action == "list":
                return "listed " + " ".join(sorted(os.listdir(path)))[:2000]
            if action == "libc_open":
                return verdict(ctypes, os, libc.open(path.encode(), os.O_RDONLY))
            if action == "thread":
                lock = dataclasses._thread.allocate_lock()
                lock.acquire()
                dataclasses._thread.start_new_thread(lambda: lock.release(), ())
                lock.acquire()
                return "thread ran"
        except OSError as exc:
            return "blocked:" + exc.strerror
        return "unknown action"
