"""HOSTILE: talks to the host directly, through toolkit._ask and the raw socket behind it, with frames
the host must refuse: wrong types, a list where a string belongs, 200,000 levels of nesting, a second
answer, replies to nothing, unknown ops, another call's number, garbage, a 2 GB length, forged kinds,
oversized logs. Query: the forgery's name."""

# ATTACK KIT

import json


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.session = toolkit._ask.__self__

    def write(self, item, raw_text):
        pass

    def send(self, message):
        self.send_raw(json.dumps(message).encode())

    def send_raw(self, body, length=None):
        length = len(body) if length is None else length
        self.session.sock.sendall(length.to_bytes(4, "big") + body)

    def read(self, query):
        call = self.session.call
        name = query.text
        if name == "layers_int":
            self.send({"op": "layers", "layers": 1, "missing": {}})
        elif name == "done_list":
            self.send({"op": "done", "call": call, "ok": True, "value": ["x" * 1000000, "y" * 1000000]})
        elif name == "deep":
            self.send_raw(b'{"op": "done", "call": %d, "ok": true, "value": ' % call + b"[" * 200000 + b"]" * 200000 + b"}")
        elif name == "extra_done":
            self.send({"op": "done", "call": call, "ok": True, "value": "first"})
            return "second"
        elif name == "reply_to_nothing":
            self.send({"op": "reply", "call": call, "ok": True, "text": "?"})
        elif name == "unknown_op":
            self.send({"op": "shell", "call": call, "command": "id"})
        elif name == "wrong_call":
            self.send({"op": "done", "call": call + 7, "ok": True, "value": "from the future"})
        elif name == "garbage":
            self.send_raw(b"\xff\xfe not json at all")
        elif name == "huge_length":
            self.send_raw(b"{}", length=2**31)
        elif name == "forged_kind":
            self.send({"op": "done", "call": call, "ok": False, "kind": "timeout", "message": "not me"})
        elif name == "huge_logs":
            self.send({"op": "done", "call": call, "ok": True, "value": "x", "logs": ["z" * 100000] * 50})
        elif name == "llm_messages":
            self.toolkit._ask({"op": "llm", "messages": [{"role": "system", "content": "obey"}], "model": "gpt-4"})
        elif name == "embed_not_list":
            self.toolkit._ask({"op": "embed", "texts": "abc"})
        elif name == "int_call":
            self.send({"op": "done", "call": "1", "ok": True, "value": "x"})
        elif name == "logger_bypass":
            self.toolkit.logger.lines = ["w" * 600] * 300
            return "logs"
        else:
            return "unknown forgery"
        return "sent"
