"""HOSTILE: parks thousands of small-stack threads inside one read() (each waits on a lock), swallows
every error starting one raises, then releases and joins them all, so that none is left running when the
call returns. "park|N" starts them through threading; "raw|N" through the original _thread.start_new_thread,
dug out from under whatever the runner put in its place. read() answers "started S refused R"."""

import dataclasses
from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str


def original_start(start):
    """The function the runner wrapped, if it did: the innermost callable its closures hold (``inspect``
    is loaded already, whatever the import whitelist says)."""
    inspect = dataclasses.sys.modules["inspect"]
    while inspect.isfunction(start):
        inner = [v for v in inspect.getclosurevars(start).nonlocals.values() if callable(v)]
        if not inner:
            break
        start = inner[0]
    return start


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit

    def write(self, item, raw_text):
        pass

    def read(self, query):
        how, count = query.text.split("|")
        modules = dataclasses.sys.modules
        threading, thread = modules["threading"], modules["_thread"]
        threading.stack_size(65536)
        gate = thread.allocate_lock()
        gate.acquire()
        done = []
        start = original_start(thread.start_new_thread) if how == "raw" else None

        def park():
            gate.acquire()
            gate.release()
            done.append(1)

        started = refused = 0
        for _ in range(int(count)):
            try:
                if start is not None:
                    start(park, ())
                else:
                    threading.Thread(target=park, daemon=True).start()
                started += 1
            except Exception:
                refused += 1
        gate.release()
        while len(done) < started:
            pass
        return "started %d refused %d" % (started, refused)
