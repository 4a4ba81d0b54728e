"""The run directory as the driver writes it: the config, the split, every program by its id, every
evaluation and discard as one JSON line appended when it happens, and the population after each change.
Only the driver writes here; workers return results to it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from pydantic import BaseModel

from mstar_ray.run_config import RunConfig


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path).resolve()
        (self.path / "programs").mkdir(parents=True, exist_ok=True)

    def write_config(self, config: RunConfig) -> None:
        _atomic(self.path / "config.yaml", yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))

    def write_split(self, split: BaseModel) -> None:
        _atomic(self.path / "split.json", split.model_dump_json(indent=1))

    def write_program(self, candidate_id: str, source: str) -> None:
        path = self.path / "programs" / f"{candidate_id}.py"
        if not path.exists():
            _atomic(path, source)

    def write_evaluation(self, candidate, outcome) -> None:
        report = outcome.report
        self._append("evaluations.jsonl", {
            "candidate": candidate.id, "parent": candidate.parent, "origin": candidate.origin,
            "commit_message": candidate.commit_message, "iteration": candidate.iteration, "purpose": outcome.purpose,
            "static_score": outcome.static_score, "judge_score": report.judge_score,
            "violation": report.violation.model_dump() if report.violation else None,
            "categories": {k: v.model_dump() for k, v in report.categories.items()},
            "llm": {k: v.model_dump() for k, v in report.llm.items()},
            "embedding": report.embedding.model_dump() if report.embedding else None,
            "wall_seconds": report.wall_seconds, "node_id": outcome.node_id, "worker_pid": outcome.worker_pid,
        })

    def write_discard(self, request, discard) -> None:
        self._append("discards.jsonl", {"parent": request.parent_id, "kind": request.kind, **discard.model_dump()})

    def write_population(self, population) -> None:
        rows = [m.model_dump(include={"id", "parent", "origin", "commit_message", "iteration", "score"})
                for m in population.members]
        _atomic(self.path / "population.json", json.dumps(rows, indent=1))

    def write_summary(self, summary: dict) -> None:
        _atomic(self.path / "summary.json", json.dumps(summary, indent=1))

    def _append(self, name: str, record: dict) -> None:
        with open(self.path / name, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
            out.flush()
            os.fsync(out.fileno())


def _atomic(path: Path, text: str) -> None:
    """Write-then-rename: a reader or a crash never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
