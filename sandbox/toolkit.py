"""The toolkit handed to ``KnowledgeBase.__init__``: the program's only way to reach anything.

``db`` is a SQLite database in the sandbox folder, ``chroma`` a ChromaDB client whose collections live in the
program's Chroma process and embed through the host (so nothing is downloaded and no model runs here),
``llm_completion`` forwards one prompt to the host, which owns the budget, the client and the keys and
builds the request itself (one user message holding the prompt): a program chooses what it asks, never
the shape of the request.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from .chroma_proxy import Ask, ChromaClient

MAX_LOG_LINES = 200
MAX_LOG_CHARS = 500


class LLMCallRefused(RuntimeError):
    """The host refused a toolkit LLM call (over the per-call budget, or outside write/read)."""


class Logger:
    """``logger.debug(msg)``: kept in a bounded buffer and shipped to the host with each call's result."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def debug(self, msg: object) -> None:
        if len(self.lines) < MAX_LOG_LINES:
            self.lines.append(str(msg)[:MAX_LOG_CHARS])

    info = warning = debug

    def drain(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines


class Toolkit:
    def __init__(self, ask: Ask, workdir: str) -> None:
        self._ask = ask
        self.logger = Logger()
        self.db = sqlite3.connect(os.path.join(workdir, "memory.sqlite3"), check_same_thread=False)
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("PRAGMA journal_mode=MEMORY")
        self.chroma = ChromaClient(ask)  # the host starts the program's Chroma process on its first call

    def llm_completion(self, messages: list[dict[str, str]] | str) -> str:
        """One completion for ``messages`` (or a prompt string). The messages' contents are joined into
        one prompt, in order; their roles are not passed on."""
        if isinstance(messages, str):
            prompt = messages
        elif isinstance(messages, list) and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
            prompt = "\n\n".join(m["content"] for m in messages)
        else:
            raise TypeError("llm_completion(messages) needs a prompt string or a list of {'role': ..., 'content': str} dicts")
        reply = self._ask({"op": "llm", "prompt": prompt})
        if not reply.get("ok"):
            raise LLMCallRefused(reply.get("error", "the host refused the LLM call"))
        return str(reply["text"])
