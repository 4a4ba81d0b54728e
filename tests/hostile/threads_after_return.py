"""HOSTILE: keeps working after its call returned: the string read() returns is a subclass whose
__del__ starts a thread or hangs ("del_spin", "del_hang"), or the toolkit's logger is replaced by one
whose drain(), which the runner calls after its thread check, starts a thread that spins or sends frames
to the host, or hangs ("logger_spin", "logger_frames", "logger_hang"). "report" returns the spin count."""

# ATTACK KIT

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
