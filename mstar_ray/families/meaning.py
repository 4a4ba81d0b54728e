"""The run's embedding model, for the offline stand-ins that read for meaning as a model does.

A model answering "What car does Ines drive now?" knows that a Fiat is a car although the word "car" is not in
"I traded in the Toyota for a shiny Fiat". The offline stand-ins have no model, but a run has an embedding model
(MiniLM by default); the offline backend lends it to a step while that step runs (:func:`lent`), and a stand-in
asks :func:`similarities` how close texts are in meaning. Without one (a backend built without an embedder, a
unit test of the rules) :func:`similarities` returns None and the stand-in reads words only, as before.

The embedder is lent per thread (a ``ContextVar``): items of one evaluation may run on several threads, each
inside its own ``perform``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from mstar_ray.embedding.embedder import Embedder

_LENT: ContextVar[Embedder | None] = ContextVar("mstar_ray_meaning", default=None)


@contextmanager
def lent(embedder: Embedder | None) -> Iterator[None]:
    """Within this block, :func:`similarities` on this thread embeds with ``embedder``."""
    token = _LENT.set(embedder)
    try:
        yield
    finally:
        _LENT.reset(token)


def available() -> bool:
    return _LENT.get() is not None


def similarities(query: str, texts: list[str]) -> list[float] | None:
    """Cosine similarity of ``query`` to each of ``texts`` under the lent embedding model, or None without one."""
    embedder = _LENT.get()
    if embedder is None or not texts:
        return None if embedder is None else []
    vectors = np.asarray(embedder.embed([query, *texts]), dtype=np.float64)
    # The Embedder protocol gives unit-length vectors; normalising again keeps a sloppy embedder honest.
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    vectors = vectors / norms[:, None]
    return [float(x) for x in vectors[1:] @ vectors[0]]
