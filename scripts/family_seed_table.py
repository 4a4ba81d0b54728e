"""The paper's three seeds, offline, on a task of every family: TextWorldExpress's twc and cookingworld (seen and
unseen games), the rubric fixture (with the OFFLINE STAND-IN GRADER), and a jsonl task written from a LoCoMo
conversation (the user's-own-data path, read back through the jsonl loader), beside that conversation read by the
LoCoMo loader: the two columns must be equal.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/family_seed_table.py [--seeds a,b] [--conversation 0]
        [--data locomo10.json] [--json OUT.json]

Each seed is evaluated as ``mstar-ray eval`` does (offline task agent, all-MiniLM-L6-v2 embeddings, every text
written, every item asked). An episode task's items are its validation games and held-out test games of the train
fold (``seen``) and its test games of the test fold (``unseen``), with the task's default counts. The jsonl
directory is written to a temporary folder and deleted: LoCoMo is CC BY-NC and never kept. Wall times are one run
on a shared machine: compare seeds within a run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mstar_ray import seeds as library  # noqa: E402
from mstar_ray.actors.wiring import RoleClients  # noqa: E402
from mstar_ray.agent.evaluation import evaluate  # noqa: E402
from mstar_ray.llm.settings import LLMSettings  # noqa: E402
from mstar_ray.results import EvalReport  # noqa: E402
from mstar_ray.tasks.model import Task  # noqa: E402
from mstar_ray.families.task_registry import load_task  # noqa: E402
from scripts.task_to_jsonl import write_jsonl_task  # noqa: E402

RUBRIC_FIXTURE = ROOT / "tests" / "fixtures" / "rubric" / "healthbench.jsonl"


def columns(task: Task, report: EvalReport) -> dict[str, float]:
    """The figures a task contributes to the table: seen and unseen for episodes, the overall score otherwise."""
    if task.family == "episode":
        return {f"{task.name} {c}": report.categories[c].score for c in ("seen", "unseen") if c in report.categories}
    return {task.name: report.score}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default=",".join(library.PAPER_SEEDS))
    parser.add_argument("--conversation", type=int, default=0, help="the LoCoMo conversation the jsonl task holds")
    parser.add_argument("--data", default=None, help="locomo10.json (else the usual places)")
    parser.add_argument("--json", default=None, help="also write every figure to this file")
    args = parser.parse_args()

    roles = RoleClients(LLMSettings())
    backend, embedder = roles.backend(), roles.embedder()
    locomo = load_task("locomo", conversation=args.conversation, data=args.data)
    with tempfile.TemporaryDirectory(prefix="mstar-jsonl-") as folder:
        written = Path(folder) / f"locomo-{args.conversation}"
        write_jsonl_task(locomo, written)
        tasks = [load_task("twc"), load_task("cookingworld"), load_task("healthbench", data=str(RUBRIC_FIXTURE)),
                 load_task("jsonl", data=str(written)), locomo]
    sizes = {t.name: len(t.items) for t in tasks}
    figures: dict[str, dict[str, float]] = {}
    seconds: dict[str, dict[str, float]] = {}
    started = time.monotonic()
    for name in args.seeds.split(","):
        source = library.entry(name).path.read_text(encoding="utf-8")
        figures[name], seconds[name] = {}, {}
        for task in tasks:
            report = evaluate(source, task, backend, embedder)
            if report.violation:
                raise SystemExit(f"{name} on {task.name}: {report.violation.phase} [{report.violation.kind}]")
            figures[name].update(columns(task, report))
            seconds[name][task.name] = round(report.wall_seconds, 1)
            print(f"[{time.monotonic() - started:6.0f} s] {name} on {task.name}: {report.score:.3f} "
                  f"({report.metric}, {report.wall_seconds:.0f} s)", flush=True)

    names = list(next(iter(figures.values())))
    print("\n| seed | " + " | ".join(names) + " |\n|" + "---|" * (len(names) + 1))
    for seed, row in figures.items():
        print(f"| {seed} | " + " | ".join(f"{row[c]:.3f}" for c in names) + " |")
    print("\nitems per task: " + ", ".join(f"{task} {n}" for task, n in sizes.items())
          + "; the rubric column is graded by the OFFLINE STAND-IN GRADER (not a HealthBench score)")
    if args.json:
        Path(args.json).write_text(json.dumps({"scores": figures, "wall_s": seconds, "items": sizes}, indent=1))


if __name__ == "__main__":
    main()
