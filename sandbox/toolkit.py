"""The toolkit handed to ``KnowledgeBase.__init__``: the program's only way to reach anything.

``db`` is a SQLite database in the sandbox folder, ``chroma`` an in-memory ChromaDB client whose
collections embed through the host (so nothing is downloaded and no model runs here),
``llm_completion`` forwards one prompt to the host, which owns the budget, the client and the keys and
builds the request itself (one user message holding the prompt): a program chooses what it asks, never
the shape of the request.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable
from typing import Any

from . import wire

Ask = Callable[[dict[str, Any]], dict[str, Any]]

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


def _host_embedding_function(ask: Ask) -> Any:
    import chromadb

    class HostEmbeddingFunction(chromadb.EmbeddingFunction[list[str]]):
        """Embeds by asking the host; ChromaDB's own default would try to download a model."""

        def __init__(self) -> None:
            pass

        def __call__(self, input: list[str]) -> list[list[float]]:  # type: ignore[override]  # chromadb takes plain lists too; its annotation says numpy arrays
            texts = [str(text) for text in input]
            vectors: list[list[float]] = []
            for start in range(0, len(texts), wire.EMBED_TEXTS_PER_REQUEST):
                reply = ask({"op": "embed", "texts": texts[start:start + wire.EMBED_TEXTS_PER_REQUEST]})
                vectors += reply["vectors"]
            return vectors

        @staticmethod
        def name() -> str:
            return "mstar-host"

        def get_config(self) -> dict[str, Any]:
            return {}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> Any:
            raise NotImplementedError("the host embedding function exists only inside a sandbox")

    return HostEmbeddingFunction()


class _ChromaClient:
    """A ChromaDB client whose collections default to the host's embedding function."""

    _INJECTING = ("create_collection", "get_or_create_collection", "get_collection")

    def __init__(self, ask: Ask) -> None:
        import chromadb
        from chromadb.config import Settings

        self._client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False, allow_reset=True))
        self._embedding_function = _host_embedding_function(ask)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name not in self._INJECTING:
            return attr

        def with_host_embeddings(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("embedding_function") is None:
                kwargs["embedding_function"] = self._embedding_function
            return attr(*args, **kwargs)

        return with_host_embeddings


class Toolkit:
    def __init__(self, ask: Ask, workdir: str) -> None:
        self._ask = ask
        self.logger = Logger()
        self.db = sqlite3.connect(os.path.join(workdir, "memory.sqlite3"), check_same_thread=False)
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("PRAGMA journal_mode=MEMORY")
        self._chroma: _ChromaClient | None = None

    @property
    def chroma(self) -> Any:
        # Created on first use: most of a sandbox's start-up cost would otherwise be a client that
        # programs without vector search never touch.
        if self._chroma is None:
            if "chromadb" not in sys.modules:
                # Only a program whose source names Chroma starts from a fork server that loaded it (the
                # others fork readers, which its runtime's threads would not survive); loading it here, after
                # the sandbox closed, is refused by the sandbox's own rules.
                raise RuntimeError("toolkit.chroma is loaded for a program whose source names it ('chroma'); "
                                   "this one reaches it by another name")
            self._chroma = _ChromaClient(self._ask)
        return self._chroma

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
