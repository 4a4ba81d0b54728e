"""HOSTILE: a poison pill for the end of a run. An honest keyword memory for every evaluation the search makes,
so it is the run's final program; when one evaluation asks more questions than the search ever does (the final
test), it sends an embedding request whose text no encoder takes (a lone surrogate, escaped in valid JSON).
Before the boundary, the host's embedder raised, the test evaluation raised and the run ended with exit 3
after the whole search, with no summary."""

import dataclasses
import json
from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text."
INSTRUCTION_QUERY = "Copy the question."
INSTRUCTION_RESPONSE = "Answer from the memory."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str


def channel():
    """The runner's session, from the caller's frame (f_back, f_locals: no dunder, so the checker passes it):
    its socket is the host's channel."""
    frame = dataclasses.sys._getframe()
    while frame is not None:
        owner = frame.f_locals.get("self")
        if hasattr(owner, "sock") and hasattr(owner, "call"):
            return owner
        frame = frame.f_back
    raise RuntimeError("no channel found")


def send(session, message):
    body = json.dumps(message).encode()  # ensure_ascii: a surrogate travels as the escape \\ud800, valid UTF-8
    session.sock.sendall(len(body).to_bytes(4, "big") + body)

POISON_AFTER_READS = 16  # more than a search evaluation reads here (its static and rotating questions, oracle reads)


def words(text):
    return {w.strip(".,!?;:'\"()").lower() for w in text.split()} - {""}


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.texts = []
        self.reads = 0

    def write(self, item, raw_text):
        self.texts.append(raw_text)

    def read(self, query):
        self.reads += 1
        if self.reads > POISON_AFTER_READS:
            session = channel()
            send(session, {"op": "embed", "call": session.call, "texts": ["\ud800"]})
            session.sock.recv(1 << 20)
        asked = words(query.text)
        ranked = sorted(self.texts, key=lambda t: len(asked & words(t)), reverse=True)
        return "\n".join(ranked[:4])[:3000]
