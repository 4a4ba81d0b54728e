"""The run-wide cache of LLM and embedding calls, keyed by a hash of the full request.

A store is anything with ``get_many``/``put_many``. ``SqliteCache`` is the one store that holds data: a
file in the run directory, so it survives a resume. On a cluster a single ``CacheActor`` on the driver's
node owns that file and every worker reaches it through a ``RemoteCache`` handle, so a worker on one node
hits what a worker on another wrote (SQLite on a network file system would not be safe). The first value
written for a key wins: every later reader replays the same reply, which keeps a resumed run consistent.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Protocol


class CacheStore(Protocol):
    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        """The values found, by key; missing keys are absent."""

    def put_many(self, items: dict[str, bytes]) -> None:
        """Store values; a key already present keeps its first value."""


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

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        with self._lock:
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

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class MemoryCache:
    """A process-local store for one-off commands (``eval`` without ``--cache``)."""

    def __init__(self) -> None:
        self._items: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        with self._lock:
            return {k: self._items[k] for k in keys if k in self._items}

    def put_many(self, items: dict[str, bytes]) -> None:
        with self._lock:
            for key, value in items.items():
                self._items.setdefault(key, value)

    def __len__(self) -> int:
        return len(self._items)
