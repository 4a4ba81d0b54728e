"""What a finished run found, without its timings: the record a refactor must leave unchanged.

    .venv/bin/python scripts/run_fingerprint.py RUN_DIR [RUN_DIR_2]

Prints, as sorted JSON, every candidate (id, parent, origin, status, commit message, static score), every
result row (candidate, question, split, query, context, prediction, score, stage), the task agent's requests
per step, and the summary's choice (returned program, best seed, test scores). Wall times, latencies, node
ids and paths are left out: they move from run to run. With two run directories it compares them instead
and prints the first of each table's differences (exit 1 if any). Only a run that decides the same way in
every run (R = E = 1 and a deterministic backend) can be compared this way.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from mstar_ray.runlog.reader import read_table

CANDIDATE_KEYS = ("id", "parent", "origin", "status", "commit_message", "patch", "static_score", "category_scores",
                  "violation_kind", "requests", "texts_written", "stage_counts", "structural_key", "duplicate_of", "verdict")
RESULT_KEYS = ("candidate", "question_id", "split", "query", "context", "prediction", "score", "stage")


def _rows(run_dir: Path, table: str, keys: tuple[str, ...]) -> list[dict]:
    rows = read_table(run_dir, table).to_pylist()
    return [{k: r.get(k) for k in keys} for r in rows]


def fingerprint(run_dir: Path) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    calls = Counter((r["role"], r["step"], r["cache_hit"]) for r in read_table(run_dir, "llm_calls").to_pylist())
    return {
        "candidates": _rows(run_dir, "candidates", CANDIDATE_KEYS),
        "results": sorted(_rows(run_dir, "results", RESULT_KEYS), key=lambda r: json.dumps(r, sort_keys=True)),
        "calls": sorted([list(k) + [n] for k, n in calls.items()], key=str),
        "summary": {side: {k: summary[side].get(k) for k in ("id", "origin", "static_score", "test_score")}
                    for side in ("best", "best_seed")} | {"rule": summary.get("selection", {}).get("rule")},
    }


def main() -> int:
    prints = [fingerprint(Path(p)) for p in sys.argv[1:3]]
    if len(prints) == 1:
        json.dump(prints[0], sys.stdout, indent=1, sort_keys=True)
        return 0
    differ = False
    for part in prints[0]:
        a, b = prints[0][part], prints[1][part]
        if a != b:
            differ = True
            first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))) if isinstance(a, list) else None
            print(f"{part}: differ ({len(a)} against {len(b)} entries" + (f"; first at {first}: {a[first] if first < len(a) else '-'} "
                  f"against {b[first] if first < len(b) else '-'}" if first is not None else f": {a} against {b}") + ")")
    print("identical" if not differ else "the runs differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
