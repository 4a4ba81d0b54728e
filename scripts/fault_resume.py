"""Kill the driver of a real search at random moments, resume it each time, and check what survives.

Runs one uninterrupted search and one that is SIGKILLed N times (each time at a random moment after
start-up) and resumed with ``mstar-ray run --resume``, both with R = E = 1 and the offline backend, then
checks: no candidate evaluated twice, none lost (every queued id has a row), and the final population
(ids, parents, scores, in order) equal to the uninterrupted run's.

    .venv/bin/python scripts/fault_resume.py [--kills 5] [--seed 0] [--candidates 40] [--delay 6 12]

``--delay LOW HIGH`` bounds the random moment of each kill (seconds after the process starts); on a busy
machine Ray's start-up alone can take the default 6-12 s, so later kills are needed to land mid-search.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.ipc
import yaml

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "mstar_ray.cli", "run"]


def config(candidates: int) -> dict:
    return {
        "task": {"name": "synthetic", "seed": 1},
        "split": {"static_size": 8, "rotating_size": 2, "train_ratio": 2.0},
        "search": {"seeds": [str(ROOT / "seeds" / f"{s}.py") for s in ("vector_search", "experience_learner")],
                   "max_candidates": candidates, "reflections_in_flight": 1, "evaluations_in_flight": 1},
        "llm": {"embedding": {"kind": "hashing"}},
        "ray": {"num_cpus": 2},
    }


def table(run_dir: Path, name: str) -> list[dict]:
    path = run_dir / f"{name}.arrows"
    return pyarrow.ipc.open_stream(str(path)).read_all().to_pylist() if path.exists() else []


def population(run_dir: Path) -> list[tuple]:
    return [(r["id"], r["parent"], round(r["static_score"], 6)) for r in table(run_dir, "candidates")
            if r["status"] == "evaluated"]


def check(run_dir: Path) -> list[str]:
    rows = [r for r in table(run_dir, "candidates") if r["status"] != "duplicate"]
    ids = [r["id"] for r in rows]
    queued = {e["candidate"] for e in table(run_dir, "events") if e["kind"] == "submitted"}
    problems = []
    if len(ids) != len(set(ids)):
        problems.append(f"evaluated twice: {sorted({i for i in ids if ids.count(i) > 1})}")
    if queued - set(ids):
        problems.append(f"queued but never evaluated: {sorted(queued - set(ids))}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--candidates", type=int, default=40)
    parser.add_argument("--delay", type=float, nargs=2, default=(6.0, 12.0), metavar=("LOW", "HIGH"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.yaml"
        path.write_text(yaml.safe_dump(config(args.candidates)))
        reference, faulty = Path(tmp) / "reference", Path(tmp) / "faulty"
        subprocess.run([*CLI, str(path), "--run-dir", str(reference)], check=True, capture_output=True, cwd=ROOT)
        command = [*CLI, str(path), "--run-dir", str(faulty)]
        for kill in range(args.kills):
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
            delay = rng.uniform(*args.delay)
            time.sleep(delay)
            finished = process.poll() is not None
            process.send_signal(signal.SIGKILL)
            process.wait()
            rows = len(table(faulty, "candidates"))
            print(f"kill {kill + 1}: after {delay:.1f} s{' (already finished)' if finished else ''}; {rows} candidate rows")
            command = [*CLI, "--resume", str(faulty)]
        subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
        problems = check(faulty)
        same = population(faulty) == population(reference)
        resumed = sum(e["kind"] == "resumed" for e in table(faulty, "events"))
        print(json.dumps({"kills": args.kills, "resumes": resumed, "candidates": len(population(faulty)),
                          "problems": problems, "population_equals_uninterrupted": same}, indent=1))
        return 0 if same and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
