"""``mstar-ray ablate CONFIG``: the paper's ablation table, and a best-of-N baseline, from one run config.

Every variant is the config with one switch changed (``VARIANTS``), run ``repeats`` times with search seeds
``seed, seed + 1, ...``: the same budget, seeds, task and split rule for all, each a full ``mstar-ray run``
(its own run directory under ``OUT/``, so a variant can be inspected, reported and resumed like any run; an
ablation started again skips the runs it finished and resumes the one it was in). ``best-of-N`` spends the
same number of children on single reflections of a seed (``parent_selection: seeds``): does evolution help?

The table gives, per variant, the returned programs' test score pooled over the repeats' test questions with
its bootstrap interval, the best seed's on the same questions, the evaluations spent, and each variant
against best-of-N as a paired interval over the same (repeat, question) pairs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from mstar_ray import seeds as library
from mstar_ray.exit_codes import EXIT_OK, InputError
from mstar_ray.run_config import RunConfig, load_run_config, resolve_seeds
from mstar_ray.runlog import layout
from mstar_ray.runlog.reader import read_table
from mstar_ray.search.noise import bootstrap_interval, paired_interval
from mstar_ray.search.variants import BASELINE, VARIANTS, slug

TABLE = "ablation.json"


class RunScores(BaseModel):
    variant: str
    repeat: int
    run_dir: str
    best_origin: str
    evaluations: int
    test: dict[str, float]  # question id -> the returned program's test score
    seed_test: dict[str, float]  # the best seed's, on the same questions


def variant_config(config: RunConfig, config_path: Path, name: str, repeat: int) -> RunConfig:
    """The config of one run: the variant's switch, the repeat's search seed, seeds by absolute path."""
    seeds = [s if library.is_name(s) else str(p) for s, p in zip(config.search.seeds, resolve_seeds(config, config_path))]
    search = config.search.model_copy(update={**VARIANTS[name], "seed": config.search.seed + repeat, "seeds": seeds})
    return RunConfig.model_validate({**config.model_dump(mode="json"), "search": search.model_dump(mode="json")})


def _scores(run_dir: Path, name: str, repeat: int) -> RunScores:
    summary = json.loads((run_dir / layout.SUMMARY).read_text(encoding="utf-8"))
    best, seed = summary["best"]["id"], summary["best_seed"]["id"]
    rows = [r for r in read_table(run_dir, "results").to_pylist() if r["split"] == "test"]
    def by(cid: str) -> dict[str, float]:
        return {r["question_id"]: r["score"] for r in rows if r["candidate"] == cid}

    return RunScores(variant=name, repeat=repeat, run_dir=str(run_dir), best_origin=summary["best"]["origin"],
                     evaluations=summary["candidates_evaluated"], test=by(best), seed_test=by(seed))


def _pooled(runs: list[RunScores], key: str) -> list[float]:
    return [score for run in sorted(runs, key=lambda r: r.repeat) for _, score in sorted(getattr(run, key).items())]


def table(runs: list[RunScores]) -> list[dict[str, Any]]:
    """One row per variant: pooled test score and interval, the best seed's, evaluations, and against best-of-N."""
    rows = []
    baseline = [r for r in runs if r.variant == BASELINE]
    for name in VARIANTS:
        mine = [r for r in runs if r.variant == name]
        if not mine:
            continue
        scores, seeds = _pooled(mine, "test"), _pooled(mine, "seed_test")
        row = {"variant": name, "repeats": len(mine), "test": sum(scores) / len(scores),
               "interval": list(bootstrap_interval(scores, seed=0)), "best_seed_test": sum(seeds) / len(seeds),
               "evaluations": sum(r.evaluations for r in mine), "evolved": sum(r.best_origin != "seed" for r in mine)}
        paired = {r.repeat: r for r in baseline}
        if name != BASELINE and mine and all(r.repeat in paired for r in mine):
            base = _pooled([paired[r.repeat] for r in mine], "test")
            if len(base) == len(scores):
                lead = [a - b for a, b in zip(scores, base)]
                row["vs_best_of_n"] = sum(lead) / len(lead)
                row["vs_best_of_n_interval"] = list(paired_interval(scores, base, seed=0))
        rows.append(row)
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'variant':<15} {'test':>6} {'95% interval':>16} {'best seed':>9} {'evolved':>7} {'evals':>6}  vs best-of-N"]
    for r in rows:
        low, high = r["interval"]
        versus = (f"{r['vs_best_of_n']:+.3f} [{r['vs_best_of_n_interval'][0]:+.3f}, {r['vs_best_of_n_interval'][1]:+.3f}]"
                  if "vs_best_of_n" in r else "")
        lines.append(f"{r['variant']:<15} {r['test']:>6.3f} [{low:>6.3f}, {high:>6.3f}] {r['best_seed_test']:>9.3f} "
                     f"{r['evolved']:>3}/{r['repeats']:<3} {r['evaluations']:>6}  {versus}")
    return "\n".join(lines)


def run_ablation(config_path: str, *, out: str, repeats: int, variants: list[str] | None,
                 address: str | None) -> int:
    """Run every variant ``repeats`` times (skipping finished runs), then write and print the table."""
    from mstar_ray.driver.run import run_search

    by_slug = {slug(name): name for name in VARIANTS}
    variants = [by_slug.get(v.lower(), v) for v in variants] if variants else list(VARIANTS)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise InputError(f"--variants: unknown ablation variant(s) {', '.join(unknown)}; the variants: "
                         + ", ".join(f"{name} ({slug})" for slug, name in by_slug.items()))
    if repeats < 1:
        raise InputError("--repeats must be at least 1")
    config = load_run_config(config_path)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    runs: list[RunScores] = []
    for repeat in range(repeats):
        for name in variants:
            run_dir = root / f"{slug(name)}-{repeat}"
            if not (run_dir / layout.SUMMARY).is_file():
                own = root / f"{slug(name)}-{repeat}.yaml"
                own.write_text(yaml.safe_dump(variant_config(config, Path(config_path), name, repeat)
                                              .model_dump(mode="json", exclude_defaults=True), sort_keys=False),
                               encoding="utf-8")
                started = (run_dir / layout.CONFIG).is_file()
                code = run_search(None if started else str(own), run_dir=str(run_dir), address=address, resume=started)
                if code != EXIT_OK:
                    return code
            runs.append(_scores(run_dir, name, repeat))
    rows = table(runs)
    (root / TABLE).write_text(json.dumps({"config": str(config_path), "repeats": repeats, "rows": rows,
                                          "runs": [r.model_dump() for r in runs]}, indent=1), encoding="utf-8")
    print(render(rows))
    return EXIT_OK
