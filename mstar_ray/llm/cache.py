"""The run-wide cache of LLM and embedding calls, keyed by a hash of the full request.

A store is anything with ``get_many``/``put_many``, and ``reserve``/``abandon`` for requests in flight.
``SqliteCache`` is the one store that holds data: a file in the run directory, so it survives a resume. On a
cluster a single cache actor on the driver's node owns that file and every worker reaches it through a
``Remote`` proxy (``actors.run_services``), so a worker on one node hits what a worker on another wrote (SQLite
on a network file
system would not be safe). The first value written for a key wins: every later reader replays the same
reply, which keeps a resumed run consistent.

Identical requests in flight at the same time are sent once: the first caller of a key that is not cached
reserves it, and a caller of the same key who comes while it is reserved waits for the reply to appear
instead of sending its own (E evaluators starting siblings at once would otherwise pay for each extraction E
times). ``put_many`` ends a reservation; ``abandon`` ends one whose request failed. A reservation lapses after
the ``ttl_s`` its holder gave (the holder died, or its request hangs): a waiter then sends the request itself,
so the worst case is the old one, two calls, never a wait for ever.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from collections.abc import Iterable
from typing import Any, Protocol

from pydantic import BaseModel


class CacheStore(Protocol):
    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        """The values found, by key; missing keys are absent."""

    def put_many(self, items: dict[str, bytes]) -> None:
        """Store values, ending their keys' reservations; a key already present keeps its first value."""

    def reserve(self, key: str, ttl_s: float) -> Reservation:
        """The value, or the caller's reservation of the key, or neither (another caller holds it: ask again)."""

    def abandon(self, key: str) -> None:
        """End the caller's reservation without a value (its request failed)."""


class Reservation(BaseModel):
    value: bytes | None = None  # the cached reply
    mine: bool = False  # no reply and nobody sending the request: the caller sends it, then puts or abandons it


class Reservations:
    """Which keys are being computed, until when. Pure, with the clock passed in; the stores hold one behind
    their lock."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def take(self, key: str, now: float, ttl_s: float) -> bool:
        """Reserve ``key`` for the caller unless someone else holds it (and has not let it lapse)."""
        if self._until.get(key, now) > now:
            return False
        self._until[key] = now + ttl_s
        return True

    def end(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._until.pop(key, None)


def request_key(kind: str, request: dict[str, Any]) -> str:
    """A stable hash of the whole request (model, messages, temperature, limits, response format...)."""
    canonical = json.dumps({"kind": kind, "request": request}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class SqliteCache:
    """A cache file shared safely by the threads of one process and by processes on one machine."""

    # SQLite caps the number of host parameters in one statement.
    _BATCH = 500

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
        self._reservations = Reservations()

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        with self._lock:
            return self._get(keys)

    def _get(self, keys: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), self._BATCH):
            batch = keys[start : start + self._BATCH]
            marks = ",".join("?" * len(batch))
            found.update(self._db.execute(f"SELECT key, value FROM entries WHERE key IN ({marks})", batch))
        return found

    def put_many(self, items: dict[str, bytes]) -> None:
        if not items:
            return
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR IGNORE INTO entries (key, value) VALUES (?, ?)", items.items())
            self._db.execute("COMMIT")
            self._reservations.end(items)

    def reserve(self, key: str, ttl_s: float) -> Reservation:
        with self._lock:
            value = self._get([key]).get(key)
            if value is not None:
                return Reservation(value=value)
            return Reservation(mine=self._reservations.take(key, time.monotonic(), ttl_s))

    def abandon(self, key: str) -> None:
        with self._lock:
            self._reservations.end([key])

    def __len__(self) -> int:
        with self._lock:
            count: int = self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            return count

    def close(self) -> None:
        with self._lock:
            self._db.close()


class MemoryCache:
    """A process-local store for one-off commands (``eval`` without ``--cache``)."""

    def __init__(self) -> None:
        self._items: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._reservations = Reservations()

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        with self._lock:
            return {k: self._items[k] for k in keys if k in self._items}

    def put_many(self, items: dict[str, bytes]) -> None:
        with self._lock:
            for key, value in items.items():
                self._items.setdefault(key, value)
            self._reservations.end(items)

    def reserve(self, key: str, ttl_s: float) -> Reservation:
        with self._lock:
            if key in self._items:
                return Reservation(value=self._items[key])
            return Reservation(mine=self._reservations.take(key, time.monotonic(), ttl_s))

    def abandon(self, key: str) -> None:
        with self._lock:
            self._reservations.end([key])

    def __len__(self) -> int:
        return len(self._items)
