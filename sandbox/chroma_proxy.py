"""``toolkit.chroma`` as the program sees it: a ChromaDB client whose calls run in the program's Chroma process.

The collections live in a process of their own (``chroma_store``), reached through the host, so that this one
keeps a single thread and its reads can run in forked readers. Texts are embedded here, through the host, with
the collection's embedding function (the host's unless the program gave one): the Chroma process receives
vectors and asks nobody for anything. Calls take Chroma's own arguments and return what Chroma returns; an error
Chroma raised there is raised here as a ``ChromaError`` naming its type.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy

from . import wire
from .chroma_store import packed, plain

Ask = Callable[[dict[str, Any]], dict[str, Any]]
Embed = Callable[[list[str]], list[list[float]]]
BATCH = 128  # items sent in one request: a request's vectors fit a frame


class ChromaError(ValueError):
    """An error Chroma raised for this call, in the program's Chroma process."""


def _listed(value: Any) -> list[Any] | None:
    """Chroma's one-or-many arguments (an id, or a list of them) as a list."""
    if value is None:
        return None
    if isinstance(value, (str, dict)):
        return [value]
    return list(plain(value))


class Collection:
    def __init__(self, client: ChromaClient, described: dict[str, Any], embed: Embed):
        self._client = client
        self.name: str = described["name"]
        self.metadata: dict[str, Any] | None = described["metadata"]
        self._embed = embed

    def __repr__(self) -> str:
        return f"Collection(name={self.name})"

    def _call(self, method: str, **kwargs: Any) -> Any:
        return self._client._call("collection", method, kwargs, name=self.name)

    def count(self) -> int:
        return int(self._call("count"))

    def _changed(self, method: str, ids: Any, embeddings: Any, metadatas: Any, documents: Any) -> None:
        ids, documents, metadatas = _listed(ids), _listed(documents), _listed(metadatas)
        vectors = plain(embeddings)
        if vectors is None and documents is not None:
            vectors = self._embed([str(text) for text in documents])
        elif vectors and not isinstance(vectors[0], list):
            vectors = [vectors]  # one vector, as Chroma accepts it
        for start in range(0, max(len(ids or []), 1), BATCH):  # an empty or missing list: Chroma's error
            part = slice(start, start + BATCH)
            self._call(method, ids=ids[part] if ids else ids, embeddings=packed(vectors[part]) if vectors else vectors,
                       metadatas=metadatas[part] if metadatas else metadatas,
                       documents=documents[part] if documents else documents)

    def add(self, ids: Any, embeddings: Any = None, metadatas: Any = None, documents: Any = None) -> None:
        self._changed("add", ids, embeddings, metadatas, documents)

    def upsert(self, ids: Any, embeddings: Any = None, metadatas: Any = None, documents: Any = None) -> None:
        self._changed("upsert", ids, embeddings, metadatas, documents)

    def update(self, ids: Any, embeddings: Any = None, metadatas: Any = None, documents: Any = None) -> None:
        self._changed("update", ids, embeddings, metadatas, documents)

    def delete(self, ids: Any = None, where: Any = None, where_document: Any = None) -> None:
        self._call("delete", ids=_listed(ids), where=where, where_document=where_document)

    def get(self, ids: Any = None, where: Any = None, limit: int | None = None, offset: int | None = None,
            where_document: Any = None, include: Any = None) -> dict[str, Any]:
        found = self._call("get", ids=_listed(ids), where=where, limit=limit, offset=offset,
                           where_document=where_document, include=include)
        if found.get("embeddings") is not None:
            found["embeddings"] = numpy.array(found["embeddings"])
        return dict(found)

    def peek(self, limit: int = 10) -> dict[str, Any]:
        return self.get(limit=limit, include=["embeddings", "documents", "metadatas"])

    def query(self, query_embeddings: Any = None, query_texts: Any = None, ids: Any = None, n_results: int = 10,
              where: Any = None, where_document: Any = None, include: Any = None) -> dict[str, Any]:
        vectors = plain(query_embeddings)
        if vectors is None and query_texts is not None:
            vectors = self._embed([str(text) for text in _listed(query_texts) or []])
        elif vectors and not isinstance(vectors[0], list):
            vectors = [vectors]
        found = self._call("query", query_embeddings=packed(vectors) if vectors else vectors, ids=_listed(ids),
                           n_results=n_results, where=where,
                           where_document=where_document, include=include)
        if found.get("embeddings") is not None:
            found["embeddings"] = [numpy.array(rows) for rows in found["embeddings"]]
        return dict(found)

    def modify(self, name: str | None = None, metadata: dict[str, Any] | None = None) -> None:
        described = self._call("modify", name=name, metadata=metadata)
        self._client._renamed(self.name, described["name"])
        self.name, self.metadata = described["name"], described["metadata"]


class ChromaClient:
    def __init__(self, ask: Ask):
        self._ask = ask
        self._embedders: dict[str, Embed] = {}  # collection name -> how its texts are embedded

    def _host_embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), wire.EMBED_TEXTS_PER_REQUEST):
            reply = self._ask({"op": "embed", "texts": texts[start:start + wire.EMBED_TEXTS_PER_REQUEST]})
            vectors += reply["vectors"]
        return vectors

    def _call(self, target: str, method: str, kwargs: dict[str, Any], name: str | None = None) -> Any:
        try:
            payload = json.dumps({"target": target, "method": method, "name": name, "kwargs": plain(kwargs)},
                                 allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{method}(): Chroma's arguments must be strings, numbers, lists and dicts: {exc}") from None
        reply = self._ask({"op": "chroma", "payload": payload})
        answer = json.loads(reply["payload"])
        if not answer["ok"]:
            raise ChromaError(f"{answer['type']}: {answer['error']}")
        return answer["value"]

    def _collection(self, described: dict[str, Any], embedding_function: Any) -> Collection:
        name = described["name"]
        if embedding_function is not None:
            self._embedders[name] = lambda texts: plain(embedding_function(texts))
        return Collection(self, described, self._embedders.get(name, self._host_embed))

    def _renamed(self, old: str, new: str) -> None:
        if old in self._embedders:
            self._embedders[new] = self._embedders.pop(old)

    def create_collection(self, name: str, configuration: Any = None, metadata: Any = None,
                          embedding_function: Any = None, get_or_create: bool = False) -> Collection:
        described = self._call("client", "create_collection", {
            "name": name, "configuration": configuration, "metadata": metadata, "get_or_create": get_or_create})
        return self._collection(described, embedding_function)

    def get_or_create_collection(self, name: str, configuration: Any = None, metadata: Any = None,
                                 embedding_function: Any = None) -> Collection:
        described = self._call("client", "get_or_create_collection", {
            "name": name, "configuration": configuration, "metadata": metadata})
        return self._collection(described, embedding_function)

    def get_collection(self, name: str, embedding_function: Any = None) -> Collection:
        return self._collection(self._call("client", "get_collection", {"name": name}), embedding_function)

    def delete_collection(self, name: str) -> None:
        self._call("client", "delete_collection", {"name": name})

    def list_collections(self, limit: int | None = None, offset: int | None = None) -> list[Collection]:
        return [self._collection(described, None)
                for described in self._call("client", "list_collections", {"limit": limit, "offset": offset})]

    def count_collections(self) -> int:
        return int(self._call("client", "count_collections", {}))

    def heartbeat(self) -> int:
        return int(self._call("client", "heartbeat", {}))
