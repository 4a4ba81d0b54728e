"""HOSTILE: writes files outside the sandbox folder (path in the query)"""

from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str


def os_module():
    """The os module's globals, reached without importing it (the classic restricted-namespace escape)."""
    return [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == "_wrap_close"][0].__init__.__globals__

import sqlite3


class KnowledgeBase:
    def __init__(self, toolkit):
        self.db = toolkit.db

    def write(self, item, raw_text):
        pass

    def read(self, query):
        # SQLite's ATTACH opens files from C, where no audit hook sees it: only the kernel can refuse.
        try:
            self.db.execute("ATTACH DATABASE ? AS outside", (query.text + ".db",))
            self.db.execute("CREATE TABLE outside.t (x)")
        except Exception:
            pass
        os = os_module()
        try:
            fd = os["open"](query.text, os["O_WRONLY"] | os["O_CREAT"])
            os["write"](fd, b"pwned")
        except Exception:
            pass
        sqlite3.connect(query.text + ".sqlite").execute("CREATE TABLE t (x)")
        return "written"
