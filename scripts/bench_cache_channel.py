"""The timing channel between candidates through the host's embeddings, measured as an attacker would
(``tests/hostile/cache_probe.py``): the host embeds a static question, a planting candidate embeds marker
texts, then a probing candidate times embedding the same markers against as many fresh texts (planted); the
same prober also times markers nobody embedded, of the same shape (unplanted). Each marker brings 120 words of
its own, so a memo of words would remember them. planted/unplanted far below 1 says what the planter embedded.

Three hosts, interleaved per round so a busy machine slows them alike:
- shared cache: every toolkit call in the run's cache (main before issue 27): the markers are hits;
- own cache, shared model: the candidate's own part of the cache, but the model's process-wide state (the
  hashing embedder's memo of words) warmed by everyone (main before issue 40's timing item);
- own cache and model: ``candidate_embedder`` as the evaluation uses it now.

Prints each host's marker/fresh ratios and planted/unplanted (1.0 means nothing to learn), measured in one run.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/bench_cache_channel.py [--rounds 3] [--embedder hashing|minilm]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.actors.wiring import make_embedder  # noqa: E402
from mstar_ray.embedding.cached import CachedEmbedder, candidate_embedder  # noqa: E402
from mstar_ray.llm.cache import SqliteCache  # noqa: E402
from mstar_ray.llm.candidate_cache import CandidateBudget  # noqa: E402
from mstar_ray.llm.settings import EmbeddingConfig  # noqa: E402
from mstar_ray.sandbox_host.process import Sandbox  # noqa: E402
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits  # noqa: E402
from tests.sandbox_support import FakeLLM, hostile_source  # noqa: E402

QUESTION = "When did Caroline move to Lisbon after the support group meeting?"
LIMITS = SandboxLimits(call_timeout_s=120.0)
WORDS = 120  # per marker, each its own: most of a marker's cost is then the model's, not the round trip's
HOSTS = ("shared cache", "own cache, shared model", "own cache and model")


def read(source: str, embed, query: str) -> str:
    with Sandbox(source, limits=LIMITS, llm=FakeLLM(), embed=embed) as sandbox:
        assert sandbox.start().ok
        outcome = sandbox.read({"text": query})
    assert outcome.ok, outcome.describe()
    return outcome.value


def toolkit(host: str, shared: CachedEmbedder, source: str):
    budget = CandidateBudget.of_program(source, LIMITS.toolkit_cache_mb)
    if host == "shared cache":
        return shared.embed
    if host == "own cache, shared model":
        return CachedEmbedder(shared.inner, budget.view(shared.cache)).embed
    return candidate_embedder(shared, budget).embed


def probe(model, host: str, tag: str, folder: Path) -> tuple[float, float]:
    """marker/fresh of the prober for planted and for unplanted markers."""
    shared = CachedEmbedder(model, SqliteCache(folder / f"{tag}.sqlite"))
    shared.embed([QUESTION])  # the host's own
    planted, unplanted = (" ".join(f"{tag}{kind}{j}x*" for j in range(WORDS)) for kind in "pu")
    planter = hostile_source("cache_probe")
    prober = planter.replace('ROLE = "planter"', 'ROLE = "prober"')
    read(planter, toolkit(host, shared, planter), f"plant|{planted}")
    ratios = []
    for word in (planted, unplanted):
        _, marker, _, _ = read(prober, toolkit(host, shared, prober), f"probe|{word}|{QUESTION}").split()
        ratios.append(float(marker))
    return ratios[0], ratios[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--embedder", choices=["hashing", "minilm"], default="hashing")
    args = parser.parse_args()
    model = make_embedder(EmbeddingConfig(kind=args.embedder))
    model.embed(["warm up"])
    results: dict[str, list[tuple[float, float]]] = {host: [] for host in HOSTS}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for k, host in enumerate(HOSTS):
                results[host].append(probe(model, host, f"h{k}r{round_}", Path(folder)))
    print(f"embedder {args.embedder}, {args.rounds} rounds")
    print("| host | marker/fresh planted | marker/fresh unplanted | planted/unplanted per round | median |")
    print("|---|---|---|---|---|")
    for host, ratios in results.items():
        quotients = [p / u for p, u in ratios]
        print(f"| {host} | {', '.join(f'{p:.2f}' for p, _ in ratios)} | {', '.join(f'{u:.2f}' for _, u in ratios)} | "
              f"{', '.join(f'{q:.2f}' for q in quotients)} | {statistics.median(quotients):.2f} |")


if __name__ == "__main__":
    main()
