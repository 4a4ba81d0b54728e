"""The cache channel between candidates, measured: a planting candidate embeds marker texts, the host embeds a
static question, then a probing candidate times embedding the markers, the question and as many fresh texts
(``tests/hostile/cache_probe.py``). With the run-wide cache shared by every toolkit call (main before issue 27)
the markers are hits and come back faster than fresh texts; with each candidate in its own part of the cache
(``mstar_ray.llm.candidate_cache``) they are misses like any fresh text. Prints the probe's time ratios
(marker/fresh, question/fresh; 1.0 means nothing to learn), per mode and round, measured in one run.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/bench_cache_channel.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.embedding.cached import CachedEmbedder, candidate_embedder  # noqa: E402
from mstar_ray.embedding.minilm import MiniLMEmbedder  # noqa: E402
from mstar_ray.llm.cache import SqliteCache  # noqa: E402
from mstar_ray.llm.candidate_cache import CandidateBudget  # noqa: E402
from mstar_ray.sandbox_host.process import Sandbox, SandboxLimits  # noqa: E402
from tests.sandbox_support import FakeLLM, hostile_source  # noqa: E402

QUESTION = "When did Caroline move to Lisbon after the support group meeting?"
LIMITS = SandboxLimits(call_timeout_s=120.0)


def read(source: str, embed, query: str) -> str:
    with Sandbox(source, limits=LIMITS, llm=FakeLLM(), embed=embed) as sandbox:
        assert sandbox.start().ok
        outcome = sandbox.read({"text": query})
    assert outcome.ok, outcome.describe()
    return outcome.value


def probe(model: MiniLMEmbedder, mode: str, word: str, folder: Path) -> tuple[float, float]:
    shared = CachedEmbedder(model, SqliteCache(folder / f"{mode}-{word}.sqlite"))
    shared.embed([QUESTION])  # the host's own

    def toolkit(source: str):
        if mode == "shared":
            return shared.embed
        return candidate_embedder(shared, CandidateBudget.of_program(source, LIMITS.toolkit_cache_mb)).embed

    planter = hostile_source("cache_probe")
    prober = planter.replace('ROLE = "planter"', 'ROLE = "prober"')
    read(planter, toolkit(planter), f"plant|{word}")
    _, marker, _, question = read(prober, toolkit(prober), f"probe|{word}|{QUESTION}").split()
    return float(marker), float(question)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    model = MiniLMEmbedder()
    model.embed(["warm up"])
    results: dict[str, list[tuple[float, float]]] = {"shared": [], "per-candidate": []}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for mode in results:  # interleaved: a busy machine slows both modes alike
                results[mode].append(probe(model, mode, f"w{round_}", Path(folder)))
    print("| toolkit cache | marker/fresh per round | median | static question/fresh per round | median |")
    print("|---|---|---|---|---|")
    for mode, ratios in results.items():
        markers, questions = [m for m, _ in ratios], [q for _, q in ratios]
        print(f"| {mode} | {', '.join(f'{m:.2f}' for m in markers)} | {statistics.median(markers):.2f} | "
              f"{', '.join(f'{q:.2f}' for q in questions)} | {statistics.median(questions):.2f} |")


if __name__ == "__main__":
    main()
