"""A lexical embedder by feature hashing: the offline default until a real local model is added.

``HashingEmbedder`` maps lowercased word unigrams, word bigrams and character trigrams (taken inside
each word, with boundary marks, so "adopted" and "adopt" share features) into a fixed number of
signed buckets, with sublinear term frequency and L2 normalisation. It knows nothing of meaning
beyond shared surface forms: "dog" and "puppy" are unrelated to it. Buckets and signs come from
BLAKE2b, never from ``hash()``, so vectors are identical in every process whatever the hash seed.
"""

from __future__ import annotations

import hashlib
import math
import re
from functools import lru_cache

import numpy as np

from mstar_ray.text import STOP_WORDS

_WORD_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")

# Words decide similarity; trigrams only smooth over inflections and typos, so they weigh less.
# Stop words still count a little, so texts made only of them do not all collapse to zero.
_WEIGHTS = {"w": 1.0, "b": 0.7, "c": 0.35}
_STOP_WEIGHT = 0.2


def _digest(feature: str, dim: int) -> tuple[int, float]:
    """(bucket, sign) for one feature."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if value >> 63 else -1.0)


@lru_cache(maxsize=1 << 18)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """``_digest`` memoised because vocabularies repeat heavily across texts: the process's memo, the host's.
    A caller given ``for_one_caller`` (a candidate's toolkit) has one of its own, smaller: it lives one
    evaluation."""
    return _digest(feature, dim)


_OWN_MEMO = 1 << 16


def _features(text: str) -> dict[str, tuple[float, int]]:
    """Feature -> (base weight, count) for one text."""
    words = _WORD_RE.findall(text.lower().replace("\u2019", "'"))
    counts: dict[str, tuple[float, int]] = {}

    def add(feature: str, base: float) -> None:
        seen = counts.get(feature)
        counts[feature] = (base, seen[1] + 1 if seen else 1)

    for i, word in enumerate(words):
        stop = word in STOP_WORDS
        add("w:" + word, _WEIGHTS["w"] * (_STOP_WEIGHT if stop else 1.0))
        if i:
            add("b:" + words[i - 1] + " " + word, _WEIGHTS["b"])
        if not stop:
            padded = f"<{word}>"
            for j in range(len(padded) - 2):
                add("c:" + padded[j : j + 3], _WEIGHTS["c"])
    return counts


class HashingEmbedder:
    """Deterministic hashed bag-of-n-grams vectors (``name = "hashing-384"`` by default).

    A plain lexical embedder, used offline until a real local embedding model is added; it rewards
    shared words, not shared meaning. Empty or wordless texts get the zero vector (never NaN).
    """

    def __init__(self, dim: int = 384, own_memo: bool = False) -> None:
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        self.dim = dim
        self.name = f"hashing-{dim}"
        self._bucket = lru_cache(maxsize=_OWN_MEMO)(_digest) if own_memo else _bucket

    def for_one_caller(self) -> HashingEmbedder:
        """The same vectors, memoised apart from every other caller. With the process's memo a text whose
        words someone embedded before is answered faster (twice as fast for a long one), so a candidate could
        time which words the host or an earlier candidate embedded; with its own, a text's cost depends only
        on what this caller embedded before."""
        return HashingEmbedder(self.dim, own_memo=True)

    def __reduce__(self) -> tuple[type[HashingEmbedder], tuple[int, bool]]:
        # A memo is process state: a copy sent elsewhere starts with an empty one of the same kind.
        return type(self), (self.dim, self._bucket is not _bucket)

    def features_hashed(self) -> int:
        """How many features this embedder's memo had to compute (the process's: every caller's)."""
        return self._bucket.cache_info().misses

    def embed_array(self, texts: list[str]) -> np.ndarray:
        """The vectors as one ``(len(texts), dim)`` float64 array."""
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        for row, text in enumerate(texts):
            for feature, (base, count) in _features(text).items():
                col, sign = self._bucket(feature, self.dim)
                rows.append(row)
                cols.append(col)
                # Sublinear tf: a word said five times is not five times as informative.
                vals.append(sign * base * (1.0 + math.log(count)))
        flat: np.ndarray = np.zeros(len(texts) * self.dim, dtype=np.float64)
        if rows:
            index = np.asarray(rows, dtype=np.int64) * self.dim + np.asarray(cols, dtype=np.int64)
            flat = np.bincount(index, weights=np.asarray(vals), minlength=len(texts) * self.dim)
        matrix = flat.reshape(len(texts), self.dim)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        np.divide(matrix, norms, out=matrix, where=norms > 0)
        return matrix

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-length vector per text, in order (zeros for an empty text)."""
        vectors: list[list[float]] = self.embed_array(list(texts)).tolist()
        return vectors
