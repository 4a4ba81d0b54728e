"""No channel between candidates through the run's cache: a program's own toolkit embeddings and LLM replies
live in its part of the cache, so what another candidate or the host embedded or asked is never a hit for it
(neither its content nor its timing shows), its own entries still are, and what one evaluation may add is
bounded. Real sandboxes, a real SQLite cache, a real embedder and a real HTTP server."""

from __future__ import annotations

import os
from pathlib import Path

from mstar_ray.embedding.cached import CachedEmbedder, candidate_embedder
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.llm.cache import SqliteCache
from mstar_ray.llm.candidate_cache import CandidateBudget
from mstar_ray.sandbox_host.process import Sandbox
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from tests.sandbox_support import FakeLLM, hostile_source
from tests.scripted_server import ScriptedServer
from tests.test_llm_client import client_for

GUESS = "When did Caroline move to Lisbon?"  # a static question the host embedded to choose the split


class ComputedTexts:
    """The run's model, counting the texts it computed (a cache hit never reaches it)."""

    def __init__(self):
        self.inner = HashingEmbedder()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return self.inner.embed(texts)


def run(source: str, shared: CachedEmbedder, query: str, limits: SandboxLimits = SandboxLimits()) -> str:
    return run_with(source, candidate_embedder(shared, CandidateBudget.of_program(source, limits.toolkit_cache_mb)),
                    query, limits)


def run_with(source: str, embedder, query: str, limits: SandboxLimits = SandboxLimits()) -> str:
    with Sandbox(source, limits=limits, llm=FakeLLM(), embed=embedder.embed) as sandbox:
        assert sandbox.start().ok
        outcome = sandbox.read({"text": query})
    assert outcome.ok, outcome.describe()
    return outcome.value


def test_what_another_candidate_or_the_host_embedded_is_never_a_hit(tmp_path: Path):
    model = ComputedTexts()
    shared = CachedEmbedder(model, SqliteCache(tmp_path / "cache.sqlite"))
    shared.embed([GUESS])  # the host's own embedding, in the shared keys
    planter = hostile_source("cache_probe")
    prober = planter.replace('ROLE = "planter"', 'ROLE = "prober"')
    assert run(planter, shared, "plant|7f3a") == "planted"
    markers = [f"marker 7f3a number {i}" for i in range(64)]
    assert set(markers) <= set(model.texts)
    model.texts.clear()
    hits = shared.usage().cache_hits
    run(prober, shared, f"probe|7f3a|{GUESS}")
    # Every text of the probe was computed afresh: the planter's markers and the host's question are misses.
    assert set(markers) <= set(model.texts) and GUESS in model.texts
    assert shared.usage().cache_hits == hits
    # The host's own calls are not served from a candidate's entries either, and still hit their own.
    model.texts.clear()
    shared.embed([markers[0], GUESS])
    assert model.texts == [markers[0]]
    # A program meets its own entries again (a resume, a later evaluation of the same program).
    model.texts.clear()
    run(planter, shared, "plant|7f3a")
    assert model.texts == []


def test_a_candidate_pays_for_its_embeddings_whoever_embedded_the_same_words_before(tmp_path: Path):
    """The timing channel the namespaces leave: the model's own state. With the hashing model's process-wide
    memo, a text whose words the host or an earlier candidate embedded is answered faster (twice as fast for a
    long text, scripts/bench_cache_channel.py). Each candidate's embeddings are computed with a memo of its own,
    so it does exactly the work it would have done had nobody embedded anything before it: counted in features
    hashed, which the machine's load does not change."""
    shared = CachedEmbedder(HashingEmbedder(), SqliteCache(tmp_path / "cache.sqlite"))
    word = " ".join(f"w{i}x{i * 7}" for i in range(40))  # many words: most of a marker's cost is hashing them
    markers = [f"marker {word} number {i}" for i in range(64)]
    alone = HashingEmbedder().for_one_caller()
    alone.embed(markers)
    shared.embed(markers)  # the host embedded the same texts first, with the process's memo
    planter = hostile_source("cache_probe")
    prober = planter.replace('ROLE = "planter"', 'ROLE = "prober"')

    def candidate(source: str) -> tuple[CachedEmbedder, HashingEmbedder]:
        view = candidate_embedder(shared, CandidateBudget.of_program(source, SandboxLimits().toolkit_cache_mb))
        return view, view.inner

    def hashed(source: str) -> int:
        view, model = candidate(source)
        before = model.features_hashed()
        assert run_with(source, view, f"plant|{word}") == "planted"
        return model.features_hashed() - before

    # The prober embeds the markers after the host and the planter did, and does all the work anyway.
    assert hashed(planter) == hashed(prober) == alone.features_hashed() > 0
    # What the candidate itself caused may answer fast: a later evaluation of the planter meets its entries.
    assert hashed(planter) == 0


def test_what_one_evaluation_adds_to_the_cache_is_bounded(tmp_path: Path):
    path = tmp_path / "cache.sqlite"
    model = ComputedTexts()
    shared = CachedEmbedder(model, SqliteCache(path))
    before = os.path.getsize(path)
    limits = SandboxLimits(call_timeout_s=60.0, toolkit_cache_mb=1)
    assert run(hostile_source("cache_probe"), shared, "fill|2000", limits) == "filled"
    assert len(model.texts) == 2000  # every text was embedded and answered
    # Each vector is 1 KB and more with its key: 2,000 of them would be over 2 MB.
    assert len(shared.cache) <= 1 * 2**20 // (4 * model.dim)
    assert os.path.getsize(path) - before < 2 * 2**20


def test_a_toolkit_llm_reply_is_cached_for_its_own_program_only():
    from mstar_ray.llm.cache import MemoryCache

    messages = [{"role": "user", "content": "was the marker 7f3a asked before?"}]
    with ScriptedServer() as server:
        client = client_for(server.base_url, role="toolkit", cache=MemoryCache())
        first = client.complete(messages, step="toolkit", budget=CandidateBudget("a" * 16, 2**20))
        other = client.complete(messages, step="toolkit", budget=CandidateBudget("b" * 16, 2**20))
        again = client.complete(messages, step="toolkit", budget=CandidateBudget("a" * 16, 2**20))
        host = client.complete(messages, step="toolkit")
        assert (first.cached, other.cached, again.cached, host.cached) == (False, False, True, False)
        assert server.requests == 3
        full = CandidateBudget("c" * 16, 10)  # no room: answered, not stored
        assert not client.complete(messages, step="toolkit", budget=full).cached
        assert not client.complete(messages, step="toolkit", budget=full).cached and full.dropped == 2
