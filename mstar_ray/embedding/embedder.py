"""What an embedder is, for everything that takes one (the evaluation, the split, the smoke test).

An embedder whose speed depends on what it embedded before (a memo, weights loaded on first use) also has
``for_one_caller()``: an embedder with the same vectors whose cost for a caller depends only on that caller's
own calls (``mstar_ray.embedding.cached.candidate_embedder`` gives one to each candidate's toolkit)."""

from __future__ import annotations

from typing import Protocol


class Embedder(Protocol):
    name: str

    @property
    def dim(self) -> int:  # read-only: a remote embedder learns it from its first reply
        ...

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-length vector per text, in order."""
