"""The run directory as the driver writes it (layout: ``mstar_ray.runlog.layout``): the config and the
split as whole files, every program once by its id, and the four Arrow logs appended as things happen.
Only the driver writes here; workers return results to it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from mstar_ray.llm.usage import CallLog
from mstar_ray.run_config import RunConfig
from mstar_ray.runlog import layout
from mstar_ray.runlog.schemas import CandidateRow, EventRow, LLMCallRow, ResultRow
from mstar_ray.runlog.sources import load_source, store_source
from mstar_ray.runlog.writer import LogWriter, write_atomic
from mstar_ray.state.candidate import Candidate, Seed
from mstar_ray.state.transitions import (
    Discarded, Duplicate, Evaluated, Failed, GuidanceRewritten, Queued, ReflectionStarted, Retried, Screened, Stopped,
    Transition, Violated,
)

if TYPE_CHECKING:
    from mstar_ray.search.jobs import EvalOutcome
    from mstar_ray.search.selection import Challenge
    from mstar_ray.search.split import Split
    from mstar_ray.serve.replicas import ReplicaChange
    from mstar_ray.structure.population_map import PopulationMap

# What an events row of each transition says to people (kind, work, purpose, detail); its data is the
# transition itself, less what programs/ and the results log hold.
_BULK: dict[str, set[str] | bool] = {"candidate": {"source"}, "results": True, "write_example": True}  # for transitions about a Candidate


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path).resolve()
        (self.path / layout.PROGRAMS).mkdir(parents=True, exist_ok=True)
        self._logs: dict[str, LogWriter] = {}

    def _log(self, table: str) -> LogWriter:
        if table not in self._logs:
            self._logs[table] = LogWriter(self.path, table)
        return self._logs[table]

    def close(self) -> None:
        for writer in self._logs.values():
            writer.close()
        self._logs.clear()

    def write_config(self, config: RunConfig) -> None:
        text = yaml.safe_dump(config.stored(), sort_keys=False)
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

    def write_split(self, split: Split) -> None:
        write_atomic(self.path / layout.SPLIT, split.model_dump_json(indent=1).encode())

    def read_split(self) -> Split:
        from mstar_ray.search.split import Split

        return Split.model_validate_json((self.path / layout.SPLIT).read_text())

    def write_program(self, source: str) -> str:
        return store_source(self.path, source)

    def read_program(self, program_id: str) -> str:
        return load_source(self.path, program_id)

    def event(self, kind: str, *, candidate: str | None = None, iteration: int | None = None,
              actor: str | None = None, node_id: str | None = None, detail: str | None = None,
              work: str | None = None, purpose: str | None = None) -> None:
        """An event that is no search transition (an evaluation started, a confirmation finished, a resume)."""
        self._log("events").append(EventRow(kind=kind, candidate=candidate, iteration=iteration, actor=actor,
                                            node_id=node_id, detail=detail, work=work, purpose=purpose))

    def replica(self, change: ReplicaChange) -> None:
        """A served model's replica started, stopped serving or was shut down (a ``serve.replicas.ReplicaChange``)."""
        record = change.record
        self._log("events").append(EventRow(kind=change.kind, work="replica", purpose=record.app,
                                            actor=record.replica_id, node_id=record.node_id, detail=change.detail,
                                            data=record.model_dump_json()))

    def record(self, transition: Transition, *, node_id: str | None = None) -> None:
        """One search transition as one events row, which a resume replays (``mstar_ray.state.replay``)."""
        candidate = getattr(transition, "candidate", None)
        whole = candidate if isinstance(candidate, Candidate) else None  # Retried's candidate is an id
        row: dict[str, Any] = dict(
            candidate=whole.id if whole is not None else candidate, iteration=whole.iteration if whole is not None else None,
            node_id=node_id, transition=type(transition).__name__,
            data=transition.model_dump_json(exclude=_BULK if whole is not None else None))
        match transition:
            case Queued():
                row.update(kind="submitted", work="evaluation", purpose="search")
            case ReflectionStarted(iteration=iteration, kind=kind, model=model, reason=reason):
                row.update(kind="started", work="reflection", purpose=kind, iteration=iteration,
                           detail=f"reflection ({kind})" + (f" by {model}: {reason}" if model else ""))
            case GuidanceRewritten(replaced=replaced, by=by, iteration=iteration):
                row.update(kind="finished", work="reflection", purpose="guidance", iteration=iteration,
                           detail=f"instruction {replaced} rewritten as {by}")
            case Screened(score=score, bar=bar, passed=passed, repeats_parent=repeats):
                needed = "" if bar is None else f", needed {bar:.4f}"
                verdict = "goes on" if passed else "screened out" + (": its parent's answers" if repeats else "")
                row.update(kind="finished", work="evaluation", purpose="screen", detail=f"slice {score:.4f}{needed}: {verdict}")
            case Evaluated(score=score):
                row.update(kind="finished", work="evaluation", purpose="search", detail=f"static {score:.4f}")
            case Violated(kind=kind):
                row.update(kind="finished", work="evaluation", purpose="search", detail=f"violation {kind}")
            case Failed(error=error):
                row.update(kind="failed", work="evaluation", purpose="search", detail=error[:4000])
            case Duplicate(original=original, how=how):
                row.update(kind="duplicate", detail=f"{how} to {original}")
            case Discarded(parent=parent, kind=kind, iteration=iteration, reason=reason):
                row.update(kind="discarded", work="reflection", purpose=kind, iteration=iteration,
                           detail=f"{reason} (parent {parent})"[:4000])
            case Retried(candidate=cid, work=work, error=error):
                row.update(kind="retried", candidate=cid, work=work, detail=error)
            case Stopped(message=message):
                row.update(kind="stopped", detail=message)
        self._log("events").append(EventRow(**row))

    def write_evaluation(self, candidate: Candidate, outcome: EvalOutcome, splits: dict[str, str], *, written: list[str] | None = None,
                         static_evidence: float | None = None, interval: tuple[float, float] | None = None,
                         challenge: Challenge | None = None, screen_score: float | None = None, screen_threshold: float | None = None) -> None:
        """The candidate's row (search evaluations only, or a screening that found a violation: a test or a
        confirmation is logged as results and an event), its per-question results as one batch, and its LLM
        calls. ``written`` (the texts the evaluation wrote), ``static_evidence``, ``interval`` (of the static
        score), ``challenge`` (a ``search.selection.Challenge``: how it fared against the incumbent) and the
        cascade's ``screen_score`` and ``screen_threshold`` go into the row."""
        self._results_and_calls(candidate, outcome, splits)
        if outcome.purpose in ("confirm", "test"):
            self.event("finished", candidate=candidate.id, node_id=outcome.node_id, work="evaluation",
                       purpose=outcome.purpose, detail=f"{outcome.purpose} {outcome.static_score:.4f}")
            return
        violation = outcome.report.violation
        self._log("candidates").append(self._row(
            candidate, outcome, splits, status="violation" if violation else "evaluated",
            static_score=outcome.static_score, written=written, static_evidence=static_evidence,
            static_low=interval[0] if interval else None, static_high=interval[1] if interval else None,
            incumbent=challenge.incumbent if challenge else None, lead_low=challenge.low if challenge else None,
            lead_high=challenge.high if challenge else None, verdict=challenge.verdict if challenge else None,
            screen_score=screen_score, screen_threshold=screen_threshold))

    def write_screening(self, candidate: Candidate, outcome: EvalOutcome, splits: dict[str, str], *, written: list[str],
                        threshold: float | None, passed: bool) -> None:
        """A screening's results and LLM calls; the candidate's row only when the cascade stopped it there (one
        that goes on gets its row from its full evaluation, which carries its slice score too)."""
        self._results_and_calls(candidate, outcome, splits)
        if not passed:
            self._log("candidates").append(self._row(
                candidate, outcome, splits, status="screened_out", static_score=None, written=written,
                screen_score=outcome.static_score, screen_threshold=threshold))

    def _results_and_calls(self, candidate: Candidate, outcome: EvalOutcome, splits: dict[str, str]) -> None:
        self._log("results").append([
            ResultRow(candidate=candidate.id, question_id=r.id, split=splits.get(r.id, "static"), category=r.category,
                      question=r.question, expected=r.expected, prediction=r.prediction, score=r.score, judge=r.judge,
                      query=json.dumps(r.query if r.query is not None else {}), context=r.context, latency_s=r.seconds,
                      error=r.error, trace=r.trace, stage=r.stage, missing_evidence=r.missing)
            for r in outcome.report.results])
        self.write_calls(outcome.calls, candidate=candidate.id)

    @staticmethod
    def _row(candidate: Candidate, outcome: EvalOutcome, splits: dict[str, str], *, status: str, written: list[str] | None,
             **fields: Any) -> CandidateRow:
        report = outcome.report
        usage = [*report.llm.values(), *([report.embedding] if report.embedding else [])]
        rotating = [r.score for r in report.results if splits.get(r.id) == "rotating"]
        violation = report.violation
        return CandidateRow(
            id=candidate.id, **candidate.log_fields(), status=status, iteration=candidate.iteration,
            judge_score=report.judge_score, metric=report.metric,
            rotating_score=sum(rotating) / len(rotating) if rotating else None,
            category_scores={k: v.score for k, v in report.categories.items()},
            violation_kind=violation.kind if violation else None, violation_message=violation.message if violation else None,
            wall_seconds=report.wall_seconds, prompt_tokens=sum(u.prompt_tokens for u in report.llm.values()),
            completion_tokens=sum(u.completion_tokens for u in report.llm.values()),
            cost_usd=sum(c.cost_usd for c in outcome.calls), cache_hits=sum(u.cache_hits for u in usage),
            requests=sum(u.requests for u in usage), worker_pid=outcome.worker_pid, node_id=outcome.node_id,
            fix_round=candidate.fix_round,
            write_example=json.dumps(report.write_example) if report.write_example is not None else None,
            texts_written=list(written or []), stage_counts=report.stages or {}, **fields)

    def write_calls(self, calls: list[CallLog], *, candidate: str | None, parent: str | None = None) -> None:
        """Each request as the ledger priced it, for ``candidate`` (and, for a reflector call, ``parent``)."""
        if calls:
            self._log("llm_calls").append([LLMCallRow(**c.model_dump(), candidate=candidate, parent=parent)
                                           for c in calls])

    def write_duplicate(self, candidate: Candidate, duplicate_of: str, static_score: float | None) -> None:
        """A candidate not evaluated because it repeats ``duplicate_of`` (the same source, or the same
        structure): the row carries that program's static score (None while it is still being evaluated). Its
        source is kept, for the lineage note that says what it changed."""
        self.write_program(candidate.source)
        self._log("candidates").append(CandidateRow(
            id=candidate.id, **candidate.log_fields(), status="duplicate", iteration=candidate.iteration,
            duplicate_of=duplicate_of, static_score=static_score))

    def write_failed(self, candidate: Candidate, error: str) -> None:
        """A candidate whose evaluation broke down (an evaluator raised or kept dying on it): recorded as
        that candidate's failure, so the run goes on and a resume never evaluates it again."""
        self._log("candidates").append(CandidateRow(
            id=candidate.id, **candidate.log_fields(), status="failed", iteration=candidate.iteration,
            fix_round=candidate.fix_round, violation_kind="evaluation_failed", violation_message=error[:4000]))

    def write_live(self, live: dict[str, Any]) -> None:
        """What is in flight right now, for ``status`` while the run is live (rewritten as it changes)."""
        write_atomic(self.path / layout.LIVE, json.dumps(live, indent=1).encode())

    def clear_live(self) -> None:
        (self.path / layout.LIVE).unlink(missing_ok=True)

    def write_population_map(self, found: PopulationMap) -> None:
        write_atomic(self.path / layout.STRUCTURE, found.model_dump_json(indent=1).encode())

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_atomic(self.path / layout.SUMMARY, json.dumps(summary, indent=1).encode())

    def write_best(self, source: str) -> None:
        write_atomic(self.path / layout.BEST, source.encode())
