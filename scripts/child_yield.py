"""What a finished run's edits did: per edit, how many children it made, how many answered every question
as their parent did, how many scored above their parent; then the returned program's paired lead over the
best seed on test, and the test questions on which the two differ.

    .venv/bin/python scripts/child_yield.py RUN_DIR [RUN_DIR ...]

A child "answers as its parent" when it gives its parent's answer to every question both were asked (the
rule of ``Population.distinct``): to the task agent nothing changed. The paired lead is
``noise.paired_interval`` over the test questions both programs answered (bootstrap seed 0).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.runlog.reader import read_table  # noqa: E402
from mstar_ray.search.noise import paired_interval  # noqa: E402
from mstar_ray.search.population import answers_of, same_answers  # noqa: E402
from mstar_ray.state.replay import restore  # noqa: E402


def edit_table(run_dir: Path) -> str:
    members = {m.id: m for m in restore(run_dir).members}
    made: Counter[str] = Counter()
    same: Counter[str] = Counter()
    above: Counter[str] = Counter()
    for child in members.values():
        parent = members.get(child.parent) if child.parent is not None else None
        if parent is None:
            continue
        edit = child.origin if child.origin != "mutation" else f"mutation:{child.commit_message.split(':', 1)[0]}"
        made[edit] += 1
        same[edit] += same_answers(answers_of(child.results), answers_of(parent.results))
        above[edit] += child.score > parent.score
    lines = [f"children {sum(made.values())}, answering every question as their parent {sum(same.values())}",
             "| edit | children | same answers as the parent | above the parent |", "|---|---|---|---|"]
    lines += [f"| {e} | {made[e]} | {same[e]} | {above[e]} |" for e in sorted(made, key=lambda e: (-made[e], e))]
    return "\n".join(lines)


def test_rows(run_dir: Path) -> tuple[str, str, dict[str, dict[str, dict]]]:
    """The ids of the run's returned program and best seed, and each one's test results by question id."""
    summary = json.loads((run_dir / "summary.json").read_text())
    best, seed = summary["best"]["id"], summary["best_seed"]["id"]
    rows = read_table(run_dir, "results").to_pylist()
    return best, seed, {c: {r["question_id"]: r for r in rows if r["candidate"] == c and r["split"] == "test"}
                        for c in (best, seed)}


def test_lead(run_dir: Path) -> str:
    best, seed, scored = test_rows(run_dir)
    asked = sorted(set(scored[best]) & set(scored[seed]))
    if not asked:
        return f"no test questions answered by both {best} and {seed}"
    a, b = [scored[best][q]["score"] for q in asked], [scored[seed][q]["score"] for q in asked]
    low, high = paired_interval(a, b, seed=0)
    lines = [f"returned {best} test {sum(a) / len(a):.3f}, best seed {seed} {sum(b) / len(b):.3f}: paired lead "
             f"{(sum(a) - sum(b)) / len(asked):+.3f} [{low:+.3f}, {high:+.3f}] on {len(asked)} questions"]
    for q in asked:
        mine, theirs = scored[best][q], scored[seed][q]
        if mine["score"] != theirs["score"]:
            lines.append(f"  {mine['category']}: {mine['question']!r} (expected {mine['expected']!r}): returned "
                         f"{mine['prediction']!r} {mine['score']:.2f}, seed {theirs['prediction']!r} {theirs['score']:.2f}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", type=Path, nargs="+")
    args = parser.parse_args()
    for run_dir in args.run_dirs:
        if not (run_dir / "summary.json").is_file():
            print(f"{run_dir}: not a finished run directory (no summary.json)", file=sys.stderr)
            return 2
        print(f"== {run_dir}\n{test_lead(run_dir)}\n{edit_table(run_dir)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
