"""How much better can the offline reflector's code edits make a run's seeds? Every combination of up to
``--depth`` of its structural edits is applied to each seed of a run config and evaluated on every question of
the config's task, with the config's task agent. The best edited program's lead over the best seed, with its
paired interval on the same questions, measures what a search of that config could find with those edits
applied at most ``--depth`` at a time (their random choices fixed); crossover, which borrows from programs
the search makes, is not counted.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/edit_headroom.py experiments/quickstart.yaml \\
        [--set task.seed=100] [--depth 3]

Instruction edits are left out: they change only the prompts, which the offline agent does not read (with a
model as the task agent they would count, and this script does not measure them). A gain
the split cannot tell from noise is no gain a search can prove, so a headroom under the split's interval
means the search has nothing to find, however it searches.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.actors.wiring import RoleClients, probe_endpoints  # noqa: E402
from mstar_ray.agent.evaluation import evaluate  # noqa: E402
from mstar_ray.reflect.offline.engine import NoMutation  # noqa: E402
from mstar_ray.reflect.offline.reflective import INSTRUCTION_KINDS, editors  # noqa: E402
from mstar_ray.run_config import RunConfig, resolve_seeds  # noqa: E402
from mstar_ray.search.noise import paired_interval  # noqa: E402
from mstar_ray.families.task_registry import task_from_config  # noqa: E402
from scripts.search_table import settings, with_keys  # noqa: E402

# Edits that need other programs (crossover) or only touch prompts are not a seed's own headroom.
LEFT_OUT = INSTRUCTION_KINDS | {"crossover"}


def apply(source: str, kinds: tuple[str, ...]) -> str | None:
    """``source`` with each edit of ``kinds`` applied in turn (random choices from seed 0), or None if one
    does not apply."""
    for kind in kinds:
        try:
            source = editors(source, [], frozenset())[kind](random.Random(0)).source
        except NoMutation:
            return None
    return source


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config key to change")
    parser.add_argument("--depth", type=int, default=2, help="combinations of up to this many edits")
    args = parser.parse_args()
    raw = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    combos = settings(args.set)
    if len(combos) != 1:
        raise SystemExit("--set takes one value per key here")
    raw = with_keys(raw, combos[0])
    config = RunConfig.model_validate(raw)
    seeds = resolve_seeds(config, args.config)
    roles = RoleClients(probe_endpoints(config.llm))
    backend, embedder = roles.backend(), roles.embedder()
    task = task_from_config(config.task)
    print(f"{task.name}: {len(task.items)} questions, {len(task.texts)} texts, agent {backend.name}; "
          f"edits combined up to {args.depth}\n")
    base_scores: dict[str, tuple[float, list[float]]] = {}  # per seed: its score, its per-question scores
    best_child: dict[str, tuple[float, str, list[float]]] = {}  # per seed: score, edits, per-question scores
    for name, path in zip(config.search.seeds, seeds):
        source = path.read_text(encoding="utf-8")
        base = evaluate(source, task, backend, embedder)
        base_scores[name] = (base.score, [r.score for r in base.results])
        best_child[name] = (base.score, "(none)", base_scores[name][1])
        tried = 0
        for depth in range(1, args.depth + 1):
            for combo in itertools.combinations([k for k in editors(source, [], frozenset()) if k not in LEFT_OUT],
                                                depth):
                child = apply(source, combo)
                if child is None or child == source:
                    continue
                tried += 1
                report = evaluate(child, task, backend, embedder)
                if report.score > best_child[name][0]:
                    best_child[name] = (report.score, "+".join(combo), [r.score for r in report.results])
        score, combo, _ = best_child[name]
        print(f"{name}: {base.score:.3f}; {tried} edited programs; best {combo} {score:.3f} ({score - base.score:+.3f})",
              flush=True)
    best_seed = max(base_scores, key=lambda n: base_scores[n][0])
    seed_score, seed_scores = base_scores[best_seed]
    name = max(best_child, key=lambda n: best_child[n][0])
    score, combo, scores = best_child[name]
    low, high = paired_interval(scores, seed_scores, seed=0)
    print(f"\nheadroom over the best seed ({best_seed}, {seed_score:.3f}): "
          f"{score - seed_score:+.3f} [{low:+.3f}, {high:+.3f}] "
          f"({name}: {combo})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
