"""The programs the benchmarks work on: the seeds, then distinct offline mutations of them, the same on
every run (the random stream is seeded)."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mstar_ray.program_id import program_id  # noqa: E402
from mstar_ray.reflect.offline import NoMutation, propose  # noqa: E402

SEED_NAMES = ("vector_search", "llm_summarizer", "experience_learner")


def seed_sources() -> list[str]:
    return [(ROOT / "seeds" / f"{name}.py").read_text() for name in SEED_NAMES]


def seeds_and_mutants(count: int, *, key: Callable[[str], str] = program_id, donors: str = "seeds") -> list[str]:
    """``count`` programs distinct by ``key``: the seeds first, then mutations of a seed, whose crossover
    donors are the seeds (``donors="seeds"``) or every program made so far (``"all"``)."""
    seeds = seed_sources()
    programs = {key(source): source for source in seeds}
    rng = random.Random(0)
    while len(programs) < count:
        pool = seeds if donors == "seeds" else list(programs.values())
        try:
            child = propose(rng.choice(seeds), pool, rng).source
        except NoMutation:
            continue
        programs.setdefault(key(child), child)
    return list(programs.values())[:count]
