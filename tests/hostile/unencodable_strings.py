"""HOSTILE: strings no encoder takes. A lone surrogate ("\\ud800") written as a JSON escape keeps the frame valid
UTF-8 JSON, and the decoder hands the host a str that its embedder, its request cache, a tokenizer and the run
log's Arrow writer all refuse. Sent through every route a value crosses to the host: an embedding request's
text, a toolkit prompt, read()'s answer, a log line, a failure's message and traceback, a violation notice and
a key. ``write`` is honest. Query: the route's name ("pair" sends a valid surrogate pair, which must pass)."""

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


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit

    def write(self, item, raw_text):
        pass

    def send(self, message):
        send(self.session, message)

    def read(self, query):
        self.session = channel()
        call, route, lone = self.session.call, query.text, "a\ud800b"
        if route == "embed":
            self.send({"op": "embed", "call": call, "texts": ["fine", lone]})
            return "reply: " + str(sorted(json.loads(self.session.sock.recv(1 << 20)[4:])))
        if route == "llm":
            self.send({"op": "llm", "call": call, "prompt": lone})
            return "replied"
        if route == "value":
            self.send({"op": "done", "call": call, "ok": True, "value": lone})
        elif route == "low_surrogate":
            self.send({"op": "done", "call": call, "ok": True, "value": "\udfff"})
        elif route == "logs":
            self.send({"op": "done", "call": call, "ok": True, "value": "x", "logs": ["fine", lone]})
        elif route == "message":
            self.send({"op": "done", "call": call, "ok": False, "kind": "exception", "message": lone})
        elif route == "traceback":
            self.send({"op": "done", "call": call, "ok": False, "kind": "exception", "traceback": lone})
        elif route == "violation":
            self.send({"op": "violation", "call": call, "event": "open", "detail": lone})
        elif route == "key":
            self.send({"op": "done", "call": call, "ok": True, "value": "x", lone: 1})
        elif route == "returned":
            return lone  # through the runner's own channel code
        elif route == "pair":
            self.send({"op": "done", "call": call, "ok": True, "value": "smile \ud83d\ude00"})
        else:
            return "unknown route"
        return "sent"
