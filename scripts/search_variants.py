"""Search variants on the same budget and seed: cascade evaluation on and off, Pareto parents against softmax.

From one base run config, each variant is the base with a few keys changed, run to the end by ``mstar-ray run``
in its own process, one after the other (same machine, same budget, same run seed):

- ``softmax``: the base (no cascade, softmax parents): the reference;
- ``cascade``: ``search.cascade`` on (``--slice``, ``--rule``, ``--margin``);
- ``pareto``: ``parent_selection: pareto`` over static questions, no cascade.

Per variant, from its run directory: the best static and test score (``summary.json``), the per-category best
static score over the population, how many children were fully evaluated and how many were screened out, and
per accepted child (one that entered the population) the wall time and the task-agent work (questions
answered and texts written, over every evaluation of the run, screenings included: what a model-backed run
pays for).

Then the side run: every child the cascade screened out is evaluated on the whole static set, and so is its
parent, both with the texts the parent's own full evaluation wrote (one memory for both, the same questions),
to count how many of them would have beaten their parent: the cascade's misses. The parent's recomputed
score is checked against its logged one (the offline backend is deterministic), so the side run measures
what the search would have measured.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/search_variants.py experiments/locomo-offline.yaml \\
        --out /tmp/variants-locomo [--variants softmax cascade pareto] [--candidates 16] [--slice 6]
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mstar_ray.actors.wiring import RoleClients  # noqa: E402
from mstar_ray.agent.evaluation import evaluate  # noqa: E402
from mstar_ray.run_config import RunConfig  # noqa: E402
from mstar_ray.runlog.reader import read_rows  # noqa: E402
from mstar_ray.search.jobs import static_score  # noqa: E402
from mstar_ray.tasks.model import Task  # noqa: E402
from mstar_ray.families.task_registry import task_from_config  # noqa: E402


def variant_config(base: dict, name: str, args: argparse.Namespace) -> dict:
    config = copy.deepcopy(base)
    search = config.setdefault("search", {})
    search.pop("cascade", None)
    search["parent_selection"] = "softmax"
    if args.candidates:
        search["max_candidates"] = args.candidates
    if name == "cascade":
        search["cascade"] = {"slice_size": args.slice, "rule": args.rule, "margin": args.margin}
    elif name == "pareto":
        search["parent_selection"] = "pareto"
    elif name != "softmax":
        raise SystemExit(f"unknown variant {name!r}; expected softmax, cascade or pareto")
    return config


def rows(run_dir: Path, table: str) -> list[dict]:
    return [row.model_dump() for row in read_rows(run_dir, table)]


def figures(run_dir: Path) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    candidates = rows(run_dir, "candidates")
    members = [r for r in candidates if r["status"] == "evaluated"]
    accepted = [r for r in members if r["origin"] != "seed"]
    results = [r for r in rows(run_dir, "results") if r["split"] != "test"]
    per_category: dict[str, float] = {}
    for member in members:
        for category, score in member["category_scores"].items():
            per_category[category] = max(per_category.get(category, 0.0), score)
    texts_written = sum(len(r["texts_written"]) for r in candidates)
    tried = [r for r in candidates if r["status"] in ("evaluated", "screened_out") and r["origin"] != "seed"]
    screened = [r for r in tried if r["status"] == "screened_out"]
    per = max(len(accepted), 1)
    return {
        "best": {"id": summary["best"]["id"], "static": summary["best"]["static_score"],
                 "test": summary["best"]["test_score"], "origin": summary["best"]["origin"]},
        "best_static_in_population": max(r["static_score"] for r in members),
        "best_static_per_category": dict(sorted(per_category.items())),
        "children_evaluated_fully": len(accepted),
        "children_tried": len(tried),
        "screened_out": len(screened),
        "screened_share": len(screened) / max(1, len(tried)),
        "wall_s": summary["wall_seconds"],
        "wall_s_per_accepted_child": summary["wall_seconds"] / per,
        "questions_answered_per_accepted_child": len(results) / per,
        "texts_written_per_accepted_child": texts_written / per,
    }


def side_run(run_dir: Path) -> dict:
    """Each screened-out child and its parent on the whole static set, with the parent's written texts."""
    config = RunConfig.model_validate(yaml.safe_load((run_dir / "config.yaml").read_text()))
    split = json.loads((run_dir / "split.json").read_text())
    task = task_from_config(config.task)
    items, texts = {q.id: q for q in task.items}, {t.id: t for t in task.texts}
    candidates = rows(run_dir, "candidates")
    by_id = {r["id"]: r for r in candidates if r["status"] == "evaluated"}
    roles = RoleClients(config.llm)
    backend, embedder = roles.backend(), roles.embedder()
    static_items = [items[q] for q in split["static"]]

    def full_static(candidate_id: str, written: list[str]) -> float:
        source = (run_dir / "programs" / f"{candidate_id}.py").read_text()
        report = evaluate(source, Task(name=task.name, family=task.family, texts=[texts[t] for t in written],
                                       items=static_items), backend, embedder, limits=config.sandbox)
        return static_score(report, split["static"])

    cases, reproduced = [], []
    for child in (r for r in candidates if r["status"] == "screened_out"):
        parent = by_id[child["parent"]]
        parent_full = full_static(parent["id"], parent["texts_written"])
        child_full = full_static(child["id"], parent["texts_written"])
        # The parent's full evaluation also scored its rotating questions, which do not count: only its static
        # questions are re-asked, so its static score is what must come back.
        reproduced.append(abs(parent_full - parent["static_score"]) < 1e-9)
        cases.append({"child": child["id"], "slice": child["screen_score"], "bar": child["screen_threshold"],
                      "child_static": child_full, "parent": parent["id"], "parent_static": parent_full})
    return {"screened_out": len(cases), "would_have_beaten_parent": sum(c["child_static"] > c["parent_static"] + 1e-12 for c in cases),
            "parents_reproduced": f"{sum(reproduced)}/{len(reproduced)}", "cases": cases}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--variants", nargs="+", default=["softmax", "cascade", "pareto"])
    parser.add_argument("--candidates", type=int, default=None, help="search.max_candidates (default: the config's)")
    parser.add_argument("--slice", type=int, default=6, help="search.cascade.slice_size")
    parser.add_argument("--rule", choices=("parent", "quantile"), default="parent")
    parser.add_argument("--margin", type=float, default=0.05)
    args = parser.parse_args()
    base = yaml.safe_load(args.config.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict = {"config": str(args.config), "variants": {}}
    for name in args.variants:
        config_path, run_dir = args.out / f"{name}.yaml", args.out / name
        config_path.write_text(yaml.safe_dump(variant_config(base, name, args), sort_keys=False))
        if not (run_dir / "summary.json").exists():
            started = time.monotonic()
            done = subprocess.run([str(Path(sys.executable).parent / "mstar-ray"), "run", str(config_path),
                                   "--run-dir", str(run_dir)], stdout=subprocess.DEVNULL)
            if done.returncode != 0:
                raise SystemExit(f"variant {name}: mstar-ray run exited {done.returncode}; its files are in {run_dir}")
            print(f"{name}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        report["variants"][name] = figures(run_dir)
        if name == "cascade":
            report["variants"][name]["side_run"] = side_run(run_dir)
    text = json.dumps(report, indent=1)
    (args.out / "figures.json").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
