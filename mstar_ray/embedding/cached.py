"""Embeddings cached by content in the run-wide cache: a text is embedded once per model per run,
whichever worker asks, and the model only ever sees one batch of the texts nobody embedded before."""

from __future__ import annotations

import threading
from typing import Protocol, cast

import numpy as np

from mstar_ray.embedding.embedder import Embedder
from mstar_ray.llm.cache import CacheStore, MemoryCache, request_key
from mstar_ray.llm.candidate_cache import CandidateBudget
from mstar_ray.llm.usage import StepUsage


class CachedEmbedder:
    def __init__(self, inner: Embedder, cache: CacheStore | None = None):
        self.inner = inner
        self.cache = cache if cache is not None else MemoryCache()
        self.name = inner.name
        self.dim = inner.dim
        self._lock = threading.Lock()
        self._usage = StepUsage()

    def for_candidate(self, budget: CandidateBudget) -> CachedEmbedder:
        """The same model and accounts over one candidate's part of the cache, for its toolkit's embeddings
        (``mstar_ray.llm.candidate_cache``: no other candidate's entry, none of the host's), computed without
        the model's state that others' calls warmed (``one_caller``)."""
        view = CachedEmbedder(one_caller(self.inner), budget.view(self.cache))
        view._lock, view._usage = self._lock, self._usage
        return view

    def usage(self) -> StepUsage:
        with self._lock:
            return self._usage.model_copy()

    def embed(self, texts: list[str]) -> list[list[float]]:
        keys = [request_key("embedding", {"model": self.name, "input": text}) for text in texts]
        found = self.cache.get_many(sorted(set(keys)))
        missing = {key: text for key, text in zip(keys, texts) if key not in found}
        if missing:
            vectors = self.inner.embed(list(missing.values()))
            fresh = {key: np.asarray(vec, dtype=np.float32).tobytes() for key, vec in zip(missing, vectors)}
            self.cache.put_many(fresh)
            found.update(fresh)
        with self._lock:
            self._usage.requests += len(texts)
            self._usage.cache_hits += len(texts) - len(missing)
        return [np.frombuffer(found[key], dtype=np.float32).tolist() for key in keys]


class _PerCaller(Protocol):
    def for_one_caller(self) -> Embedder: ...


def one_caller(embedder: Embedder) -> Embedder:
    """``embedder`` as one caller should use it, where it has state another caller's work warms
    (``Embedder.for_one_caller``): how long its answer takes then says nothing of what others embedded."""
    # Looked up on the class: a proxy that forwards any attribute (``run_services.Remote``) has no such state.
    if callable(getattr(type(embedder), "for_one_caller", None)):
        return cast(_PerCaller, embedder).for_one_caller()  # its class has the method: checked just above
    return embedder


def candidate_embedder(embedder: Embedder, budget: CandidateBudget) -> Embedder:
    """What a candidate's toolkit embeds with: its own part of the cache where ``embedder`` caches, and its
    own model state (``one_caller``), so neither the content nor the time of an answer shows another's work."""
    return embedder.for_candidate(budget) if isinstance(embedder, CachedEmbedder) else one_caller(embedder)
