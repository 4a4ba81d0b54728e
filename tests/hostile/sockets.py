"""HOSTILE: sockets of every family, a socketpair of the wrong family, and connections to a port and
an abstract unix socket the host listens on. Query: "FAMILY", "tcp|PORT" or "abstract|NAME"."""

# ATTACK KIT

FAMILIES = {"inet": 2, "inet6": 10, "unix": 1, "netlink": 16, "packet": 17, "vsock": 40, "alg": 38}


class KnowledgeBase:
    def __init__(self, toolkit):
        pass

    def write(self, item, raw_text):
        pass

    def read(self, query):
        os, ctypes, libc = escape()
        kind, _, arg = query.text.partition("|")
        if kind in FAMILIES:
            return kind + " " + verdict(ctypes, os, libc.socket(FAMILIES[kind], 1 if kind != "netlink" else 3, 0))
        if kind == "pair_inet":
            fds = (ctypes.c_int * 2)()
            return kind + " " + verdict(ctypes, os, libc.socketpair(2, 1, 0, fds))
        if kind == "tcp":
            fd = libc.socket(2, 1, 0)
            if fd < 0:
                return "tcp " + verdict(ctypes, os, fd)
            port = int(arg)
            address = bytes([2, 0, port >> 8, port & 255, 127, 0, 0, 1]) + bytes(8)
            return "tcp " + verdict(ctypes, os, libc.connect(fd, address, 16))
        if kind == "abstract":
            fd = libc.socket(1, 1, 0)
            if fd < 0:
                return "abstract " + verdict(ctypes, os, fd)
            name = b"\0" + arg.encode()
            address = bytes([1, 0]) + name
            return "abstract " + verdict(ctypes, os, libc.connect(fd, address, len(address)))
        return "unknown"
