"""The same offline LoCoMo search started from the paper's three seeds and from the whole seed library: best
static and test score, and the seed the best program descends from.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/seed_search_comparison.py [--runs DIR] [--reuse]

Runs ``experiments/locomo-offline.yaml`` (the three paper seeds) and ``experiments/locomo-offline-library.yaml``
(every library seed; the same split, budget and run seed) with ``mstar-ray run``, one after the other, into
``DIR/paper-seeds`` and ``DIR/library`` (``--reuse`` reads runs already there instead), then prints one row per
run. Each search is a single run: its figures vary with the fitness, the budget and the run seed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from mstar_ray.runlog.reader import read_rows

ROOT = Path(__file__).resolve().parents[1]
RUNS = {"paper-seeds": ROOT / "experiments" / "locomo-offline.yaml",
        "library": ROOT / "experiments" / "locomo-offline-library.yaml"}


def seed_of(run_dir: Path, member_id: str) -> str:
    """The commit message of the seed a candidate descends from (``seed NAME``)."""
    rows = {row.id: row for row in read_rows(run_dir, "candidates") if row.status != "duplicate"}
    row = rows[member_id]
    while row.parent is not None:
        row = rows[row.parent]
    return row.commit_message.removeprefix("seed ")


def describe(run_dir: Path) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    seeds = [row for row in read_rows(run_dir, "candidates") if row.origin == "seed"]
    best, best_seed = summary["best"], summary["best_seed"]
    return {
        "seeds": len(seeds), "evaluated": summary["candidates_evaluated"], "wall_s": summary["wall_seconds"],
        "best_static": best["static_score"], "best_test": best["test_score"],
        "best_seed": seed_of(run_dir, best_seed["id"]), "best_seed_static": best_seed["static_score"],
        "best_seed_test": best_seed["test_score"], "descends_from": seed_of(run_dir, best["id"]),
        "best_is_seed": best["origin"] == "seed",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="runs/seed-comparison", help="where the two run directories go")
    parser.add_argument("--reuse", action="store_true", help="read the runs already in --runs")
    args = parser.parse_args()
    rows = {}
    for name, config in RUNS.items():
        run_dir = Path(args.runs) / name
        if not args.reuse:
            done = subprocess.run([sys.executable, "-m", "mstar_ray.cli", "run", str(config), "--run-dir", str(run_dir)])
            if done.returncode != 0:
                sys.exit(f"{name}: mstar-ray run exited with {done.returncode}")
        rows[name] = describe(run_dir)
    print("\n| start | seeds | children | best static | best test | best descends from | best seed (static / test) | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        test = "-" if r["best_test"] is None else f"{r['best_test']:.3f}"
        seed_test = "-" if r["best_seed_test"] is None else f"{r['best_seed_test']:.3f}"
        origin = r["descends_from"] + (" (the seed itself)" if r["best_is_seed"] else "")
        print(f"| {name} | {r['seeds']} | {r['evaluated']} | {r['best_static']:.3f} | {test} | {origin} | "
              f"{r['best_seed']} ({r['best_seed_static']:.3f} / {seed_test}) | {r['wall_s']:.0f} |")


if __name__ == "__main__":
    main()
