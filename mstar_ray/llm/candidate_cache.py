"""One candidate's part of the run-wide cache, for the requests its own toolkit calls make.

A shared cache is a channel: a hit is answered faster than a miss, and a cached reply is what another
caller got, so a program could learn what other candidates embedded or asked (marker texts planted by an
earlier candidate, the static questions the host embedded to choose the split). A candidate's toolkit
calls therefore use keys of a namespace of their own (its program id: the same program, in this run or a
resumed one, meets its own entries again, and nothing else), and each evaluation may add at most
``max_bytes`` of entries; past that its requests are still answered, just not stored. The host's own
calls (the task agent's, the split's) keep the shared keys: they are what makes a resume cheap.
"""

from __future__ import annotations

import hashlib
import threading

from mstar_ray.llm.cache import CacheStore, Reservation
from mstar_ray.program_id import program_id


class CandidateBudget:
    """The bytes one evaluation's toolkit calls may still add to the cache, shared by its embeddings and its
    LLM replies."""

    def __init__(self, namespace: str, max_bytes: int):
        self.namespace = namespace
        self.max_bytes = max_bytes
        self.added = 0
        self.dropped = 0  # entries answered but not stored, once the budget was spent
        self._lock = threading.Lock()

    @classmethod
    def of_program(cls, source: str, max_mb: int) -> CandidateBudget:
        return cls(program_id(source), max_mb * 2**20)

    def take(self, size: int) -> bool:
        with self._lock:
            if self.added + size > self.max_bytes:
                self.dropped += 1
                return False
            self.added += size
            return True

    def view(self, store: CacheStore) -> CandidateCache:
        return CandidateCache(store, self)


class CandidateCache:
    """A ``CacheStore`` over ``store`` in the candidate's namespace, within its budget."""

    def __init__(self, store: CacheStore, budget: CandidateBudget):
        self.store = store
        self.budget = budget

    def _key(self, key: str) -> str:
        return hashlib.sha256(f"candidate:{self.budget.namespace}:{key}".encode()).hexdigest()

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        inner = {self._key(key): key for key in keys}
        return {inner[key]: value for key, value in self.store.get_many(list(inner)).items()}

    def put_many(self, items: dict[str, bytes]) -> None:
        kept = {}
        for key, value in items.items():
            if self.budget.take(len(key) + len(value)):
                kept[self._key(key)] = value
            else:
                self.store.abandon(self._key(key))  # whoever waits for it sends the request itself
        if kept:
            self.store.put_many(kept)

    def reserve(self, key: str, ttl_s: float) -> Reservation:
        return self.store.reserve(self._key(key), ttl_s)

    def abandon(self, key: str) -> None:
        self.store.abandon(self._key(key))
