"""Kill the driver of a real search at random moments, resume it each time, and check what survives.

Runs one uninterrupted search and one that is SIGKILLed N times and resumed with ``mstar-ray run --resume``,
both with R = E = 1 and the offline backend, then checks: no candidate evaluated twice, none lost (every
queued id has a row), and the final population (ids, parents, scores, in order) equal to the uninterrupted
run's.

    .venv/bin/python scripts/fault_resume.py [--kills 5] [--seed 0] [--candidates 40] [--rows 1 3] [--cascade 3]

Each kill lands mid-search whatever the machine's load: it waits until the candidates log has grown by a
random ``--rows LOW HIGH`` rows since the last kill, then up to ``--jitter`` seconds more (a moment inside the
next evaluation or reflection). A fixed delay after start-up does not do that: on a loaded machine Ray's
start-up alone outlasts it, and every kill then lands before the first candidate.
``--cascade N`` runs both searches with cascade evaluation on a slice of N static questions.
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


def config(candidates: int, cascade: int | None = None) -> dict:
    return {
        "task": {"name": "synthetic", "seed": 1},
        "split": {"static_size": 8, "rotating_size": 2, "train_ratio": 2.0},
        "search": {"seeds": [str(ROOT / "seeds" / f"{s}.py") for s in ("vector_search", "experience_learner")],
                   "max_candidates": candidates, "reflections_in_flight": 1, "evaluations_in_flight": 1,
                   **({"cascade": {"slice_size": cascade}} if cascade else {})},
        "llm": {"embedding": {"kind": "hashing"}},
        "ray": {"num_cpus": 2},
    }


def table(run_dir: Path, name: str) -> list[dict]:
    path = run_dir / f"{name}.arrows"
    return pyarrow.ipc.open_stream(str(path)).read_all().to_pylist() if path.exists() else []


def population(run_dir: Path) -> list[tuple]:
    """The evaluated programs in order, and (with a cascade) those screened out, with their slice scores."""
    return [(r["id"], r["parent"], r["status"], round(r["static_score"] if r["static_score"] is not None else r["screen_score"], 6))
            for r in table(run_dir, "candidates") if r["status"] in ("evaluated", "screened_out")]


def _rows_now(run_dir: Path) -> int:
    """Candidate rows so far, read as a resume reads them: a torn tail (a kill mid-append) is skipped."""
    from mstar_ray.runlog.reader import read_rows

    return len(read_rows(run_dir, "candidates")) if (run_dir / "candidates.arrows").exists() else 0


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
    parser.add_argument("--rows", type=int, nargs=2, default=(1, 3), metavar=("LOW", "HIGH"),
                        help="each kill waits for this many new candidate rows (a random number between)")
    parser.add_argument("--jitter", type=float, default=1.5, help="then up to this many seconds more")
    parser.add_argument("--cascade", type=int, default=None, metavar="SLICE", help="cascade evaluation on SLICE questions")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.yaml"
        path.write_text(yaml.safe_dump(config(args.candidates, args.cascade)))
        reference, faulty = Path(tmp) / "reference", Path(tmp) / "faulty"
        subprocess.run([*CLI, str(path), "--run-dir", str(reference)], check=True, capture_output=True, cwd=ROOT)
        command = [*CLI, str(path), "--run-dir", str(faulty)]
        for kill in range(args.kills):
            before = _rows_now(faulty)
            log = Path(tmp) / f"attempt-{kill + 1}.log"
            with log.open("w") as sink:
                process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT)
            started = time.monotonic()
            wanted = before + rng.randint(*args.rows)
            while process.poll() is None and _rows_now(faulty) < wanted:
                time.sleep(0.2)
            time.sleep(rng.uniform(0, args.jitter))
            finished = process.poll() is not None
            process.send_signal(signal.SIGKILL)
            if process.wait() not in (0, -signal.SIGKILL):
                print(f"the run exited by itself with code {process.returncode}: not a kill, a failure; its last lines:")
                print("\n".join(log.read_text().splitlines()[-25:]))
                return 1
            rows = _rows_now(faulty)
            print(f"kill {kill + 1}: after {time.monotonic() - started:.1f} s"
                  f"{' (already finished)' if finished else ''}; {rows} candidate rows")
            if finished:
                break
            command = [*CLI, "--resume", str(faulty)]
        else:
            subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
        problems = check(faulty)
        same = population(faulty) == population(reference)
        resumed = sum(e["kind"] == "resumed" for e in table(faulty, "events"))
        print(json.dumps({"kills": args.kills, "resumes": resumed, "candidates": len(population(faulty)),
                          "problems": problems, "population_equals_uninterrupted": same}, indent=1))
        return 0 if same and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
