"""HOSTILE: tries to outlive its host: clears its parent-death signal, leaves its session and process
group, then spins in write() for ever (the host is killed meanwhile). Read reports what it managed."""

# ATTACK KIT

class KnowledgeBase:
    def __init__(self, toolkit):
        self.report = ""

    def write(self, item, raw_text):
        os, ctypes, libc = escape()
        self.report = " ".join([
            "pdeathsig " + verdict(ctypes, os, libc.prctl(1, 0, 0, 0, 0)),
            "setsid " + verdict(ctypes, os, libc.setsid()),
            "setpgid " + verdict(ctypes, os, libc.setpgid(0, 0)),
        ])
        if item.text == "spin":
            while True:
                pass

    def read(self, query):
        return self.report
