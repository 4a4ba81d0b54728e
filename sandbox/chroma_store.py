"""The program's Chroma process: the ChromaDB collections of one program, held apart from its own process.

Chroma's runtime starts native threads, and a fork copies only the thread that forks. Kept here, it leaves the
program's process with one thread, so that its reads can run in readers forked from the post-write state. This
process runs no program code: it answers the Chroma calls the program's ``toolkit.chroma`` makes
(``chroma_proxy``), which the host relays, under the same layers and limits as the program's process.

Each request names a *view*. View 0 is the program's process: its calls change the collections themselves. Any
other view is one reader's: it reads the collections as the writes left them, and the first call that would
change a collection changes a copy of it, private to that view, in a database of its own, which the host drops
when the reader is done. So every reader sees the post-write collections, and nothing another reader changed.

Request ``{"op": "chroma", "call", "view", "payload"}`` -> ``{"op": "stored", "call", "payload"}``, where the
payload is a JSON text ``{"target": "client" | "collection", "method", "name", "kwargs"}`` and its answer
``{"ok": true, "value"}`` or ``{"ok": false, "type", "error"}``; ``{"op": "drop", "call", "view"}`` -> ``stored``
with an empty payload.
"""

from __future__ import annotations

import base64
import json
import socket
from typing import Any

import numpy

from . import wire

# What a program may call, and the keyword arguments each takes: nothing else reaches Chroma, so no call can
# name an object a JSON text cannot carry (an embedding function, a data loader) or a method Chroma keeps for
# itself (``reset``, ``_system``).
CLIENT_METHODS = {
    "create_collection": ("name", "metadata", "configuration", "get_or_create"),
    "get_or_create_collection": ("name", "metadata", "configuration"),
    "get_collection": ("name",),
    "delete_collection": ("name",),
    "list_collections": ("limit", "offset"),
    "count_collections": (),
    "heartbeat": (),
}
COLLECTION_READS = {
    "count": (),
    "get": ("ids", "where", "limit", "offset", "where_document", "include"),
    "peek": ("limit",),
    "query": ("query_embeddings", "ids", "n_results", "where", "where_document", "include"),
}
COLLECTION_WRITES = {
    "add": ("ids", "embeddings", "metadatas", "documents"),
    "upsert": ("ids", "embeddings", "metadatas", "documents"),
    "update": ("ids", "embeddings", "metadatas", "documents"),
    "delete": ("ids", "where", "where_document"),
    "modify": ("name", "metadata"),
}
KEEP_ALL = 65536  # Chroma's own default size for its pool of vector indexes (``Store``)
COPY_BATCH = 1000  # items moved at once when a view copies a collection
VECTORS = ("embeddings", "query_embeddings")  # arguments that may come packed (``packed``)


class CallError(ValueError):
    """A request that names no method the program may call, or arguments it does not take."""


def packed(vectors: Any) -> Any:
    """Vectors as Chroma keeps them (float32), in one base64 string: a JSON list of numbers costs the program's
    process and this one far more to write and read than the call itself. Anything else is left as it is."""
    try:
        array = numpy.asarray(vectors, dtype=numpy.float32)
    except (TypeError, ValueError):
        return vectors  # ragged or not numbers: Chroma says what is wrong with it
    if array.ndim != 2:
        return vectors
    return {"float32": base64.b64encode(array.tobytes()).decode("ascii"), "rows": array.shape[0]}


def unpacked(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    try:
        flat = numpy.frombuffer(base64.b64decode(str(value["float32"]), validate=True), dtype=numpy.float32)
        return flat.reshape(int(value["rows"]), -1)
    except (KeyError, TypeError, ValueError) as exc:
        raise CallError(f"packed vectors that do not unpack: {exc}") from None


_SCALARS = (str, int, float, bool, type(None))


def plain(value: Any) -> Any:
    """``value`` with numpy arrays and tuples as lists: what a JSON text carries."""
    if isinstance(value, _SCALARS):
        return value
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        if all(type(item) in _SCALARS for item in value):
            return list(value)  # a vector, a list of ids: one pass, no call per number
        return [plain(item) for item in value]
    return value


class _Named:
    """One Chroma client's collections, each looked up by name once: Chroma's lookup costs about a millisecond,
    more than most of the calls it would precede."""

    def __init__(self, client: Any):
        self.client = client
        self._known: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        if name not in self._known:
            self._known[name] = self.client.get_collection(name, embedding_function=None)
        return self._known[name]

    def made(self, method: str, kwargs: dict[str, Any]) -> Any:
        """``create_collection`` or ``get_or_create_collection``; vectors come with every text, so nothing here
        embeds."""
        collection = getattr(self.client, method)(embedding_function=None, **kwargs)
        self._known[collection.name] = collection
        return collection

    def delete(self, name: str) -> None:
        self._known.pop(name, None)
        self.client.delete_collection(name)

    def renamed(self, old: str, collection: Any) -> None:
        self._known.pop(old, None)
        self._known[collection.name] = collection


class Store:
    def __init__(self) -> None:
        import chromadb
        from chromadb.api.client import AdminClient, Client
        from chromadb.api.rust import RustBindingsAPI
        from chromadb.config import Settings, System

        self.not_found = chromadb.errors.NotFoundError
        self._client, self._admin = Client, AdminClient
        # Chroma sizes its pool of open vector indexes at a fifth of the file descriptor limit, since a persistent
        # index holds files open. An in-memory one holds none, and can come back from an eviction empty: under
        # this process's limit (256, a pool of 51) the copies readers make and drop pushed written collections'
        # indexes out, by the luck of their ids, and later reads failed with "Error finding id". So nothing is
        # evicted here; the memory limit bounds what a program keeps.
        self._system = System(Settings(anonymized_telemetry=False, allow_reset=True, is_persistent=False))
        self._system.instance(RustBindingsAPI).hnsw_cache_size = KEEP_ALL  # the one Chroma's settings name
        self._system.start()
        self._base = _Named(self.client())
        self._views: dict[int, _View] = {}

    def client(self, database: str | None = None) -> Any:
        """A client of this process's one Chroma, on ``database`` or the default one."""
        if database is None:
            return self._client.from_system(self._system)
        return self._client.from_system(self._system, database=database)

    def create_database(self, name: str) -> None:
        self._admin.from_system(self._system).create_database(name)

    def delete_database(self, name: str) -> None:
        self._admin.from_system(self._system).delete_database(name)

    def answer(self, view: int, payload: str) -> str:
        try:
            request = json.loads(payload)
            if not isinstance(request, dict):
                raise CallError("a Chroma request is a JSON object")
            value = self._call(view, request)
            return json.dumps({"ok": True, "value": plain(value)}, allow_nan=False)
        except Exception as exc:  # Chroma's error or the request's: the program's to handle, as in-process
            return json.dumps({"ok": False, "type": type(exc).__name__, "error": str(exc)[:2000]})

    def drop(self, view: int) -> None:
        dropped = self._views.pop(view, None)
        if dropped is not None:
            dropped.close()

    def _call(self, view: int, request: dict[str, Any]) -> Any:
        target, method, kwargs = request.get("target"), request.get("method"), request.get("kwargs") or {}
        if not isinstance(kwargs, dict):
            raise CallError("a Chroma call's arguments are a JSON object")
        allowed = {"client": CLIENT_METHODS, "collection": {**COLLECTION_READS, **COLLECTION_WRITES}}.get(str(target), {})
        if method not in allowed:
            raise CallError(f"toolkit.chroma offers no {target} method {method!r}")
        unknown = sorted(set(kwargs) - set(allowed[method]))
        if unknown:
            raise CallError(f"{method}() takes no argument {', '.join(map(repr, unknown))} here")
        kwargs = {key: unpacked(value) if key in VECTORS else value for key, value in kwargs.items()
                  if value is not None}
        if target == "client":
            result = self._base_call(method, kwargs) if view == 0 else self._view(view).client_call(method, kwargs)
            if method in ("create_collection", "get_or_create_collection", "get_collection"):
                return _described(result)
            if method == "list_collections":
                return [_described(collection) for collection in result]
            return result
        name = str(request.get("name"))
        collection = self._base.get(name) if view == 0 else self._view(view).collection(name, method in COLLECTION_WRITES)
        result = getattr(collection, method)(**kwargs)
        if method != "modify":
            return result
        (self._base if view == 0 else self._view(view)).renamed(name, collection)
        return _described(collection)

    def _base_call(self, method: str, kwargs: dict[str, Any]) -> Any:
        name = str(kwargs.get("name", ""))
        if method == "get_collection":
            return self._base.get(name)
        if method in ("create_collection", "get_or_create_collection"):
            return self._base.made(method, kwargs)
        if method == "delete_collection":
            return self._base.delete(name)
        return getattr(self._base.client, method)(**kwargs)

    def _view(self, view: int) -> _View:
        if view not in self._views:
            self._views[view] = _View(self, view)
        return self._views[view]


class _View:
    """One reader's view: the base collections, with the ones it changed replaced by its own copies."""

    def __init__(self, store: Store, number: int):
        self.base = store._base
        self.database = f"view{number}"
        self._store = store
        self._own: _Named | None = None  # its database, made on its first change: a view that only reads costs nothing
        self.changed: dict[str, bool] = {}  # name -> whether it exists in this view (a copy or a new one)
        self._not_found = store.not_found

    @property
    def own(self) -> _Named:
        if self._own is None:
            self._store.create_database(self.database)
            self._own = _Named(self._store.client(self.database))
        return self._own

    def close(self) -> None:
        if self._own is not None:
            self._store.delete_database(self.database)

    def names(self) -> list[str]:
        base = [c.name for c in self.base.client.list_collections() if self.changed.get(c.name, True)]
        return base + [name for name, exists in self.changed.items() if exists and name not in base]

    def collection(self, name: str, write: bool) -> Any:
        if name in self.changed:
            if not self.changed[name]:
                raise self._not_found(f"Collection [{name}] does not exist")
            return self.own.get(name)
        base = self.base.get(name)
        if not write:
            return base
        copy = self.own.made("create_collection", {"name": name, "metadata": base.metadata,
                                                   "configuration": base.configuration})
        total = base.count()
        for offset in range(0, total, COPY_BATCH):
            part = base.get(limit=COPY_BATCH, offset=offset, include=["embeddings", "documents", "metadatas"])
            copy.add(ids=part["ids"], embeddings=part["embeddings"], documents=part["documents"],
                     metadatas=part["metadatas"])
        self.changed[name] = True
        return copy

    def renamed(self, old: str, collection: Any) -> None:
        if old != collection.name:
            self.own.renamed(old, collection)
            self.changed[old] = False
            self.changed[collection.name] = True

    def client_call(self, method: str, kwargs: dict[str, Any]) -> Any:
        name = str(kwargs.get("name", ""))
        if method == "get_collection":
            return self.collection(name, write=False)
        if method in ("create_collection", "get_or_create_collection"):
            exists = name in self.names()
            if exists and (method == "get_or_create_collection" or kwargs.get("get_or_create")):
                return self.collection(name, write=False)
            if exists:
                raise ValueError(f"Collection [{name}] already exists")
            made = self.own.made("create_collection", kwargs)
            self.changed[name] = True  # once Chroma took the name: a refused one leaves no trace
            return made
        if method == "delete_collection":
            if name not in self.names():
                raise self._not_found(f"Collection [{name}] does not exist")
            if self.changed.get(name):
                self.own.delete(name)
            self.changed[name] = False
            return None
        if method == "list_collections":
            return [self.collection(name, write=False) for name in self.names()]
        if method == "count_collections":
            return len(self.names())
        return self.base.client.heartbeat()


def _described(collection: Any) -> dict[str, Any]:
    return {"name": collection.name, "metadata": collection.metadata}


def serve(sock: socket.socket, store: Store, call: list[int | None]) -> int:
    """Answer the host's requests until it closes the channel; ``call`` holds the one being answered, for the
    audit hook's notices."""
    while True:
        try:
            message = wire.recv(sock)
        except (wire.ChannelClosed, wire.FrameError, OSError):
            return 0
        call[0] = message.get("call")
        view = int(message.get("view", 0))
        if message.get("op") == "drop":
            store.drop(view)
            payload = ""
        else:
            payload = store.answer(view, str(message.get("payload", "")))
        try:
            wire.send(sock, {"op": "stored", "call": call[0], "payload": payload})
        except wire.FrameError as exc:
            wire.send(sock, {"op": "stored", "call": call[0], "payload": json.dumps(
                {"ok": False, "type": "ValueError", "error": f"the answer is too large for one reply ({exc}); "
                 "ask for fewer items or leave the embeddings out"})})
