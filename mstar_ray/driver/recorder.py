"""The observer the driver attaches to the search policy (``search_loop.policy.SearchObserver``) and to the end of the
search (``search_loop.endgame.EndgameObserver``): each transition, with what its evaluation left, goes to the run
directory (programs, the candidates, results, llm_calls and events logs), as do the confirmation, the test and
the choice; the live line gets the messages, the phase and the model requests' counts. The counts of the search
itself are the policy's ``SearchState``, read where they are shown, never copied."""

from __future__ import annotations

from mstar_ray.driver.progress import Progress, ProgressState
from mstar_ray.driver.run_dir import RunDir
from mstar_ray.reflect.reflector import Child, ReflectionOutcome
from mstar_ray.reflect.request import ReflectionRequest
from mstar_ray.search.jobs import EvalOutcome
from mstar_ray.search.population import Member
from mstar_ray.search.selection import Selection
from mstar_ray.search_loop.policy import EvaluationRecord
from mstar_ray.state.candidate import Candidate
from mstar_ray.state.search_state import SearchState
from mstar_ray.state.transitions import Duplicate, Evaluated, Failed, Queued, Screened, Transition, Violated


class RunRecorder:
    def __init__(self, run_dir: RunDir, progress: Progress, shown: ProgressState):
        self.run_dir = run_dir
        self.progress = progress
        self.shown = shown

    def applied(self, transition: Transition, *, node_id: str | None = None,
                evaluation: EvaluationRecord | None = None) -> None:
        """What the transition leaves in the other logs and programs/, then its own events row (which a resume
        replays)."""
        match transition:
            case Queued(candidate=candidate):
                self.run_dir.write_program(candidate.source)
            case Duplicate(candidate=candidate, original=original, score=score):
                self.run_dir.write_duplicate(candidate, original, score)
            case Failed(candidate=candidate, error=error):
                self.run_dir.write_failed(candidate, error)
            case Screened(candidate=candidate, bar=bar, passed=passed) if evaluation is not None:
                self.run_dir.write_screening(candidate, evaluation.outcome, evaluation.splits,
                                             written=evaluation.written, threshold=bar, passed=passed)
            case Evaluated(candidate=candidate) | Violated(candidate=candidate) if evaluation is not None:
                self.run_dir.write_evaluation(
                    candidate, evaluation.outcome, evaluation.splits, written=evaluation.written,
                    static_evidence=evaluation.static_evidence, interval=evaluation.interval,
                    challenge=evaluation.challenge, screen_score=evaluation.screen_score)
        if evaluation is not None:
            report = evaluation.outcome.report
            for usage in [*report.llm.values(), *([report.embedding] if report.embedding else [])]:
                self.shown.requests += usage.requests
                self.shown.cache_hits += usage.cache_hits
        self.run_dir.record(transition, node_id=node_id)

    def started(self, candidate: Candidate, purpose: str, detail: str) -> None:
        self.run_dir.event("started", candidate=candidate.id, iteration=candidate.iteration, work="evaluation",
                           purpose=purpose, detail=detail)

    def reflected(self, request: ReflectionRequest, outcome: ReflectionOutcome) -> None:
        child = outcome.result.id if isinstance(outcome.result, Child) else None
        self.run_dir.write_calls(outcome.calls, candidate=child, parent=request.parent_id)

    def resumed(self, iteration: int, detail: str) -> None:
        self.run_dir.event("resumed", iteration=iteration, detail=detail)
        self.progress.message(f"resumed: {detail}")

    def say(self, text: str) -> None:
        self.progress.message(text)

    # ---------------------------------------------------------------------------------- the end of the search

    def phase(self, name: str, search: SearchState) -> None:
        self.shown.phase = name
        self.progress.update(self.shown, search, force=True)

    def side_evaluated(self, member: Member, outcome: EvalOutcome, splits: dict[str, str]) -> None:
        self.run_dir.write_evaluation(Candidate(**member.identity()), outcome, splits)

    def side_failed(self, member_id: str, purpose: str, error: str) -> None:
        self.run_dir.event("failed", candidate=member_id, work="evaluation", purpose=purpose, detail=error)

    def side_retried(self, member_id: str, purpose: str, error: str) -> None:
        self.progress.message(f"an evaluator died under the {purpose} of {member_id}; re-issuing it")
        self.run_dir.event("retried", candidate=member_id, work="evaluation", purpose=purpose, detail=error)

    def chosen(self, member_id: str, selection: Selection) -> None:
        self.progress.message(f"final program {member_id}: {selection.how}")
        self.run_dir.event("finished", candidate=member_id, work="selection", purpose=selection.rule,
                           detail=f"selection ({selection.rule}): {selection.how}")
