"""How much of a reference program's lead a search reached, per finished run: the returned program's test
score less the best seed's, over the reference program's test score less the best seed's, on the same test
questions. The reference (the paper's best LoCoMo child, say) is evaluated as the run tested its own program
(``driver.transfer.Column.job``: its test items, its test texts written), with the run's own task agent; the
returned program's and the best seed's test scores are the run's own (``results``).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/reference_share.py /tmp/locomo/* \\
        --reference /tmp/mstar-locomo/lc-18.py

A run whose reference does not lead its best seed on test has no share (nothing to reach); the mean is over
the runs that have one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.actors.wiring import RoleClients, probe_endpoints  # noqa: E402
from mstar_ray.agent.evaluation import evaluate  # noqa: E402
from mstar_ray.driver.transfer import run_column  # noqa: E402
from mstar_ray.search.noise import paired_interval  # noqa: E402
from mstar_ray.tasks.model import Task  # noqa: E402
from scripts.child_yield import test_rows  # noqa: E402


def reference_scores(run_dir: Path, reference: str) -> dict[str, float]:
    """The reference's score on each of the run's test questions, tested as the run tested its own program."""
    column, config, _ = run_column(run_dir)
    job = column.job("reference", reference)
    roles = RoleClients(probe_endpoints(config.llm))
    task = Task(name=job.task_name, family=job.family, texts=job.texts, items=job.items)
    report = evaluate(reference, task, roles.backend(), roles.embedder(), verdicts=job.judge,
                      feedback_ids=job.feedback_ids)
    test = set(job.static_ids)
    return {r.id: r.score for r in report.results if r.id in test}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", type=Path, nargs="+")
    parser.add_argument("--reference", type=Path, required=True, help="the program whose lead is the goal")
    args = parser.parse_args()
    reference = args.reference.read_text(encoding="utf-8")
    print("| run | returned | best seed | reference | returned - seed | reference - seed (paired) | share |")
    print("|---|---|---|---|---|---|---|")
    shares = []
    for run_dir in args.run_dirs:
        if not (run_dir / "summary.json").is_file():
            print(f"{run_dir}: not a finished run directory (no summary.json)", file=sys.stderr)
            return 2
        best, seed, scored = test_rows(run_dir)
        ref = reference_scores(run_dir, reference)
        asked = sorted(set(scored[best]) & set(scored[seed]) & set(ref))
        mine = [scored[best][q]["score"] for q in asked]
        base = [scored[seed][q]["score"] for q in asked]
        goal = [ref[q] for q in asked]
        mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
        reached, lead = mean(mine) - mean(base), mean(goal) - mean(base)
        low, high = paired_interval(goal, base, seed=0)
        share = reached / lead if lead > 0 else None
        if share is not None:
            shares.append(share)
        print(f"| {run_dir.name} | {mean(mine):.3f} | {mean(base):.3f} | {mean(goal):.3f} | {reached:+.3f} | "
              f"{lead:+.3f} [{low:+.3f}, {high:+.3f}] | {'-' if share is None else f'{share:.2f}'} |")
    if shares:
        print(f"\nmean share over {len(shares)} run(s) with a reference lead: {sum(shares) / len(shares):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
