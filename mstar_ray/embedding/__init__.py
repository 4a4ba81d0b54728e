"""Sentence embedders: ``MiniLMEmbedder`` (local, numpy) and ``OpenAIEmbedder`` (any /v1/embeddings server).

The classes are imported on first use, so importing the errors does not load numpy, tokenizers or openai.
"""

from __future__ import annotations

import importlib
from typing import Any

from mstar_ray.embedding.errors import EmbeddingEndpointError, EmbeddingModelMissing

_LAZY = {"MiniLMEmbedder": "mstar_ray.embedding.minilm", "OpenAIEmbedder": "mstar_ray.embedding.openai_embeddings"}

__all__ = ["EmbeddingEndpointError", "EmbeddingModelMissing", "MiniLMEmbedder", "OpenAIEmbedder"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
