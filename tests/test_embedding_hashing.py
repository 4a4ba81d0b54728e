"""The hashing embedder: shape, unit norm, determinism across hash seeds, lexical similarity, speed."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mstar_ray.embedding.embedder import Embedder
from mstar_ray.embedding.hashing import HashingEmbedder

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [
    "[14 March 2023] Alice: We finally adopted a puppy, his name is Biscuit!",
    "Alice adopted a puppy called Biscuit",
    "The stock market fell sharply on Tuesday after the bank report.",
    "I went to a LGBTQ support group yesterday and it was so powerful.",
]


def _cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


def test_name_dim_and_protocol() -> None:
    embedder: Embedder = HashingEmbedder()
    assert embedder.name == "hashing-384" and embedder.dim == 384
    small = HashingEmbedder(dim=64)
    assert small.dim == 64 and small.name == "hashing-64"
    assert len(small.embed(["hello world"])[0]) == 64
    with pytest.raises(ValueError):
        HashingEmbedder(dim=0)
    doc = (HashingEmbedder.__doc__ or "") + (sys.modules[HashingEmbedder.__module__].__doc__ or "")
    assert "lexical" in doc.lower()


def test_shape_types_and_unit_norm() -> None:
    vectors = HashingEmbedder().embed(TEXTS)
    assert len(vectors) == len(TEXTS)
    for v in vectors:
        assert isinstance(v, list) and len(v) == 384
        assert all(isinstance(x, float) for x in v)
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-9)
    assert HashingEmbedder().embed([]) == []


@pytest.mark.parametrize("text", ["", "   ", "!!! ??? ...", "\n\t"])
def test_texts_without_words_give_zero_vectors_not_nan(text: str) -> None:
    (vector,) = HashingEmbedder().embed([text])
    assert len(vector) == 384
    assert all(x == 0.0 for x in vector)


def test_stop_word_only_text_is_still_unit_length() -> None:
    (vector,) = HashingEmbedder().embed(["and the of it"])
    assert math.isclose(float(np.linalg.norm(vector)), 1.0, rel_tol=1e-9)


def test_similar_texts_are_closer_than_unrelated_ones() -> None:
    puppy, paraphrase, stocks, support = HashingEmbedder().embed(TEXTS)
    assert _cos(puppy, paraphrase) > _cos(puppy, stocks) + 0.2
    assert _cos(puppy, paraphrase) > _cos(puppy, support) + 0.2
    # Character trigrams let inflections meet: "adopting" shares features with "adopted".
    a, b, c = HashingEmbedder().embed(["adopting a puppy", "adopted puppies", "selling bonds"])
    assert _cos(a, b) > _cos(a, c)


def test_batch_order_and_repeat_consistency() -> None:
    embedder = HashingEmbedder()
    batch = embedder.embed(TEXTS)
    singles = [embedder.embed([t])[0] for t in TEXTS]
    assert batch == singles
    assert embedder.embed(list(reversed(TEXTS))) == list(reversed(batch))
    assert HashingEmbedder().embed(TEXTS) == batch


def test_sublinear_term_frequency() -> None:
    cat, many_dogs = HashingEmbedder().embed(["cat", "dog " * 30 + "cat"])
    # Thirty repetitions must not drown "cat": with raw counts this cosine falls to about 0.03.
    assert _cos(cat, many_dogs) > 0.1


def test_vectors_are_identical_across_processes_and_hash_seeds() -> None:
    script = (
        "import json\n"
        "from mstar_ray.embedding.hashing import HashingEmbedder\n"
        f"vectors = HashingEmbedder().embed({TEXTS!r})\n"
        "print(json.dumps(vectors))\n"
    )
    outputs = []
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0]) == HashingEmbedder().embed(TEXTS)
