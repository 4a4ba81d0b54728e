"""What an embedder is, for everything that takes one (the evaluation, the split, the smoke test)."""

from __future__ import annotations

from typing import Protocol


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-length vector per text, in order."""
