"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, llama.cpp, vLLM, Ollama...).

Texts go in batches of ``batch_size``; each reply is put back in input order by its ``index`` field,
checked (one flat, finite vector per text, all of one dimension) and L2-normalised, so the vectors can be
compared by dot product whatever the server returns. Retries (backoff on 429, 5xx, timeouts and connection
errors) are the ``openai`` client's own, configured by ``max_retries``.

Given the run's gateway, every request is admitted by it (the endpoint's ``max_concurrency`` and
``requests_per_minute``, and the budget) and settled with it, which prices its tokens from the run's table
and counts them against the budget, as for a chat call; ``drain_calls`` gives each request's record for the
run's ``llm_calls`` log.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any
from typing import cast

import numpy as np
import openai

from mstar_ray.embedding.errors import EmbeddingEndpointError
from mstar_ray.llm.governor import Gateway, admitted
from mstar_ray.llm.usage import CallLog

_PROBE_TIMEOUT_S = 15.0


class OpenAIEmbedder:
    """Unit-length vectors from an OpenAI-compatible embeddings endpoint (``name = "openai:<model>"``).

    ``api_key_env`` names the environment variable that holds the key (None for keyless local servers).
    ``dim`` may be given; otherwise it is learnt from the first reply, and reading ``dim`` before any call
    asks the endpoint once.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        batch_size: int = 64,
        dim: int | None = None,
        gateway: Gateway | None = None,
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if dim is not None and dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        self.base_url = base_url
        self.model = model
        self.name = f"openai:{model}"
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.batch_size = batch_size
        self._dim = dim
        self._client = openai.OpenAI(base_url=base_url, api_key=self._key(), timeout=timeout_s, max_retries=max_retries)
        self.gateway = gateway
        self._lock = threading.Lock()
        self._calls: list[CallLog] = []

    @property
    def endpoint_key(self) -> str:
        """As ``EmbeddingConfig.endpoint_key``: the gateway's name for this endpoint's limits."""
        return f"{self.base_url.rstrip('/')}#{self.model}"

    def drain_calls(self) -> list[CallLog]:
        """The requests made since the last drain, as the gateway priced them (none without a gateway)."""
        with self._lock:
            calls, self._calls = self._calls, []
        return calls

    def _key(self) -> str:
        if self.api_key_env is None:
            return "not-needed"  # the client insists on some key even when the server checks none
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise EmbeddingEndpointError(
                f"the environment variable {self.api_key_env} (the key for embeddings endpoint {self.base_url} "
                f"model {self.model!r}) is not set"
            )
        return key

    def _where(self) -> str:
        return f"embeddings endpoint {self.base_url} model {self.model!r}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.probe()
        assert self._dim is not None
        return self._dim

    def probe(self) -> int:
        """Embed one short text without retries; the vector dimension, or EmbeddingEndpointError."""
        client = self._client.with_options(max_retries=0, timeout=min(self.timeout_s, _PROBE_TIMEOUT_S))
        return len(self._embed_batch(client, ["probe"])[0])

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in order."""
        if isinstance(texts, str):
            raise TypeError("embed takes a list of texts, not one string")
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed_batch(self._client, list(texts[start : start + self.batch_size])))
        return vectors

    def _embed_batch(self, client: openai.OpenAI, batch: list[str]) -> list[list[float]]:
        lease = admitted(self.gateway, self.endpoint_key, self._where()).lease if self.gateway is not None else None
        started = time.monotonic()
        try:
            # "float" explicitly: the client otherwise asks for base64, which some compatible servers lack.
            response = client.embeddings.create(model=self.model, input=batch, encoding_format="float")
        except openai.APIError as exc:
            if lease is not None and self.gateway is not None:
                self.gateway.release(lease)
            if isinstance(exc, openai.APIStatusError):
                raise EmbeddingEndpointError(f"{self._where()} answered HTTP {exc.status_code}: {exc.message}") from None
            if isinstance(exc, openai.APIConnectionError):  # includes timeouts
                raise EmbeddingEndpointError(f"{self._where()} is unreachable: {exc}") from None
            raise EmbeddingEndpointError(f"{self._where()} failed: {exc}") from None
        if lease is not None and self.gateway is not None:
            tokens = getattr(getattr(response, "usage", None), "prompt_tokens", None) or 0
            call = self.gateway.settle(lease, CallLog(role="embedding", model=self.model, step="embed",
                                                      prompt_tokens=tokens, latency_s=time.monotonic() - started))
            with self._lock:
                self._calls.append(call)
        matrix = self._check_reply(getattr(response, "data", None) or [], len(batch))
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        # A zero vector stays zero rather than becoming NaN.
        np.divide(matrix, norms, out=matrix, where=norms > 0)
        vectors: list[list[float]] = matrix.tolist()
        return vectors

    def _check_reply(self, items: list[Any], expected: int) -> np.ndarray:
        """The reply's vectors as an (expected, dim) array in input order, or EmbeddingEndpointError."""
        by_index = {getattr(item, "index", None): getattr(item, "embedding", None) for item in items}
        if len(items) != expected or set(by_index) != set(range(expected)):
            raise EmbeddingEndpointError(
                f"{self._where()} returned {len(items)} vectors with indices [{', '.join(sorted(map(str, by_index))[:10])}] "
                f"for {expected} texts"
            )
        rows = [by_index[i] for i in range(expected)]
        for row in rows:
            if not isinstance(row, list) or not row or not all(isinstance(x, (int, float)) for x in row):
                raise EmbeddingEndpointError(
                    f"{self._where()} did not return one flat vector per text (a list of per-token vectors "
                    "means the server does no pooling; for llama.cpp's Python server add "
                    "--kv_overrides <arch>.pooling_type=int:1)"
                )
        checked = cast("list[list[float]]", rows)  # each row checked just above: a flat list of numbers
        dims = {len(row) for row in checked}
        if len(dims) != 1 or (self._dim is not None and dims != {self._dim}):
            expected_dim = f"dimension {self._dim}" if self._dim is not None else "one common dimension"
            raise EmbeddingEndpointError(
                f"{self._where()} returned vectors of dimension {sorted(dims)}, expected {expected_dim}"
            )
        matrix = np.asarray(checked, dtype=np.float64)
        if not np.isfinite(matrix).all():
            raise EmbeddingEndpointError(f"{self._where()} returned non-finite numbers")
        self._dim = matrix.shape[1]
        return matrix
