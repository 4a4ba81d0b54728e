"""The run directory as the driver writes it (layout: ``mstar_ray.runlog.layout``): the config and the
split as whole files, every program once by its id, and the four Arrow logs appended as things happen.
Only the driver writes here; workers return results to it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from mstar_ray.llm.ledger import Price, call_cost
from mstar_ray.run_config import RunConfig
from mstar_ray.runlog import layout
from mstar_ray.runlog.schemas import CandidateRow, EventRow, LLMCallRow, ResultRow
from mstar_ray.runlog.sources import load_source, store_source
from mstar_ray.runlog.writer import LogWriter, write_atomic
from mstar_ray.state.candidate import Seed


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path).resolve()
        (self.path / layout.PROGRAMS).mkdir(parents=True, exist_ok=True)
        self._logs: dict[str, LogWriter] = {}
        self.prices: dict[str, Price] = {}

    def _log(self, table: str) -> LogWriter:
        if table not in self._logs:
            self._logs[table] = LogWriter(self.path, table)
        return self._logs[table]

    def close(self) -> None:
        for writer in self._logs.values():
            writer.close()
        self._logs.clear()

    def write_config(self, config: RunConfig) -> None:
        self.prices = dict(config.llm.prices)
        text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
        write_atomic(self.path / layout.CONFIG, text.encode())

    def write_seeds(self, seeds: list[Seed]) -> None:
        listed = [{"name": seed.name, "id": self.write_program(seed.source)} for seed in seeds]
        write_atomic(self.path / layout.SEEDS, json.dumps(listed, indent=1).encode())

    def read_seeds(self) -> list[Seed]:
        """The seeds the run started with; none for a run written before seeds.json existed (it queued its
        seeds before it could be killed: nothing to re-queue)."""
        path = self.path / layout.SEEDS
        if not path.is_file():
            return []
        return [Seed(name=entry["name"], source=load_source(self.path, entry["id"]))
                for entry in json.loads(path.read_text())]

    def has_split(self) -> bool:
        return (self.path / layout.SPLIT).is_file()

    def write_split(self, split) -> None:
        write_atomic(self.path / layout.SPLIT, split.model_dump_json(indent=1).encode())

    def read_split(self):
        from mstar_ray.search.split import Split

        return Split.model_validate_json((self.path / layout.SPLIT).read_text())

    def write_program(self, source: str) -> str:
        return store_source(self.path, source)

    def event(self, kind: str, *, candidate: str | None = None, iteration: int | None = None,
              actor: str | None = None, node_id: str | None = None, detail: str | None = None) -> None:
        self._log("events").append(EventRow(kind=kind, candidate=candidate, iteration=iteration, actor=actor,
                                            node_id=node_id, detail=detail))

    def write_evaluation(self, candidate, outcome, splits: dict[str, str], *, written: list[str] | None = None,
                         static_evidence: float | None = None, interval: tuple[float, float] | None = None,
                         challenge=None) -> None:
        """The candidate's row (search evaluations only: a test or a confirmation is logged as results and
        an event), its per-question results as one batch, and its LLM calls. ``written`` (the texts the
        evaluation wrote), ``static_evidence``, ``interval`` (of the static score) and ``challenge`` (a
        ``search.selection.Challenge``: how it fared against the incumbent) go into the row."""
        report = outcome.report
        self._log("results").append([
            ResultRow(candidate=candidate.id, question_id=r.id, split=splits.get(r.id, "static"), category=r.category,
                      question=r.question, expected=r.expected, prediction=r.prediction, score=r.score, judge=r.judge,
                      query=json.dumps(r.query if r.query is not None else {}), context=r.context, latency_s=r.seconds,
                      error=r.error)
            for r in report.results])
        self.write_calls(outcome.calls, candidate=candidate.id)
        if outcome.purpose != "search":
            self.event("finished", candidate=candidate.id, node_id=outcome.node_id,
                       detail=f"{outcome.purpose} {outcome.static_score:.4f}")
            return
        usage = [*report.llm.values(), *([report.embedding] if report.embedding else [])]
        rotating = [r.score for r in report.results if splits.get(r.id) == "rotating"]
        violation = report.violation
        self._log("candidates").append(CandidateRow(
            id=candidate.id, **candidate.log_fields(), status="violation" if violation else "evaluated", iteration=candidate.iteration,
            static_score=outcome.static_score, judge_score=report.judge_score,
            rotating_score=sum(rotating) / len(rotating) if rotating else None,
            category_scores={k: v.score for k, v in report.categories.items()},
            violation_kind=violation.kind if violation else None, violation_message=violation.message if violation else None,
            wall_seconds=report.wall_seconds, prompt_tokens=sum(u.prompt_tokens for u in report.llm.values()),
            completion_tokens=sum(u.completion_tokens for u in report.llm.values()),
            cost_usd=sum(self._cost(c) for c in outcome.calls), cache_hits=sum(u.cache_hits for u in usage),
            requests=sum(u.requests for u in usage), worker_pid=outcome.worker_pid, node_id=outcome.node_id,
            fix_round=candidate.fix_round,
            write_example=json.dumps(report.write_example) if report.write_example is not None else None,
            texts_written=list(written or []), static_evidence=static_evidence,
            static_low=interval[0] if interval else None, static_high=interval[1] if interval else None,
            incumbent=challenge.incumbent if challenge else None, lead_low=challenge.low if challenge else None,
            lead_high=challenge.high if challenge else None, verdict=challenge.verdict if challenge else None,
        ))
        self.event("finished", candidate=candidate.id, iteration=candidate.iteration, node_id=outcome.node_id,
                   detail=f"static {outcome.static_score:.4f}" + (f"; violation {violation.kind}" if violation else ""))

    def write_queued(self, candidate) -> None:
        """A candidate enters the evaluation queue: everything needed to re-issue it after a crash."""
        detail = {**candidate.log_fields(), "fix_round": candidate.fix_round}
        self.event("submitted", candidate=candidate.id, iteration=candidate.iteration, detail=json.dumps(detail))

    def write_calls(self, calls, *, candidate: str | None, parent: str | None = None) -> None:
        if calls:
            self._log("llm_calls").append([
                LLMCallRow(candidate=candidate, parent=parent, role=c.role, model=c.model, step=c.step, prompt_tokens=c.prompt_tokens,
                           completion_tokens=c.completion_tokens, latency_s=c.latency_s, cache_hit=c.cache_hit,
                           cost_usd=self._cost(c), retries=c.retries)
                for c in calls])

    def write_duplicate(self, candidate, duplicate_of: str, static_score: float | None) -> None:
        """A candidate not evaluated because it repeats ``duplicate_of`` (the same source, or the same
        structure): the row carries that program's static score (None while it is still being evaluated)."""
        self._log("candidates").append(CandidateRow(
            id=candidate.id, **candidate.log_fields(), status="duplicate", iteration=candidate.iteration,
            duplicate_of=duplicate_of, static_score=static_score))

    def write_failed(self, candidate, error: str) -> None:
        """A candidate whose evaluation broke down (an evaluator raised or kept dying on it): recorded as
        that candidate's failure, so the run goes on and a resume never evaluates it again."""
        self._log("candidates").append(CandidateRow(
            id=candidate.id, **candidate.log_fields(), status="failed", iteration=candidate.iteration,
            fix_round=candidate.fix_round, violation_kind="evaluation_failed", violation_message=error[:4000]))
        self.event("failed", candidate=candidate.id, iteration=candidate.iteration, detail=error[:4000])

    def write_discard(self, request, discard, iteration: int) -> None:
        detail = json.dumps({"parent": request.parent_id, "kind": request.kind, "reason": discard.reason,
                             "attempts": discard.attempts, "errors": discard.errors})
        self.event("discarded", iteration=iteration, detail=detail)

    def write_live(self, live: dict) -> None:
        """What is in flight right now, for ``status`` while the run is live (rewritten as it changes)."""
        write_atomic(self.path / layout.LIVE, json.dumps(live, indent=1).encode())

    def clear_live(self) -> None:
        (self.path / layout.LIVE).unlink(missing_ok=True)

    def write_families(self, families) -> None:
        write_atomic(self.path / layout.STRUCTURE, families.model_dump_json(indent=1).encode())

    def write_summary(self, summary: dict) -> None:
        write_atomic(self.path / layout.SUMMARY, json.dumps(summary, indent=1).encode())

    def write_best(self, source: str) -> None:
        write_atomic(self.path / layout.BEST, source.encode())

    def _cost(self, call) -> float:
        """A cache hit cost nothing; anything else as the ledger prices it."""
        return 0.0 if call.cache_hit else call_cost(self.prices, call.model, call.prompt_tokens, call.completion_tokens)
