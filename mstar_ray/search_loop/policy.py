"""The search policy: what to run next, and what a result means. Ray-free: it hands out ``Work`` and takes
back what finished, so any pool can drive it (the Ray pool in ``driver.search_driver``, a plain one in tests).

It keeps R reflections and E evaluations busy in a steady state, not lock-step generations: a reflection
starts only while fewer than E children wait for or undergo evaluation, so evaluators stay busy without
children piling up; with R = E = 1 this is the paper's sequential loop (reflect, evaluate, add, reflect...).
Every random choice is seeded by (run seed, iteration), never by timing. Each change of the search's state
is a transition (``mstar_ray.state.transitions``), applied to the one ``SearchState`` (which holds every count
of the run) and handed to the observer the driver attached, which logs it (a resume replays it) and keeps the
live line (``driver.recorder``). The policy itself writes nothing.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import random
import time
from collections.abc import Callable
from typing import NoReturn
from typing import Protocol

from mstar_ray.exit_codes import InfrastructureError, InputError
from mstar_ray.families import family
from mstar_ray.llm.errors import BudgetExceeded
from mstar_ray.reflect.reflector import Child, Discard, ReflectionOutcome
from mstar_ray.reflect.registry import reflector_class
from mstar_ray.reflect.request import ReflectionRequest, Relative, sample_cases, shown_results
from mstar_ray.results import EvalReport, stage_totals
from mstar_ray.run_config import RunConfig
from mstar_ray.search.cascade import cascade_rule, passes
from mstar_ray.search.fix_report import fix_report
from mstar_ray.search.jobs import EvalJob, EvalJobs, EvalOutcome
from mstar_ray.search.parents import parent_rule
from mstar_ray.search.population import Member, answers_of, same_answers
from mstar_ray.search.selection import Challenge, Incumbent
from mstar_ray.search.split import SplitPlan
from mstar_ray.search.stop import BudgetCheck, SearchCount, StopReason, stop_conditions
from mstar_ray.search.work import Crashed, Done, Finished, Pool, Raised, Work
from mstar_ray.search_loop.steering import Steering
from mstar_ray.state.candidate import Candidate, FixRound
from mstar_ray.state.search_state import SearchState
from mstar_ray.state.transitions import (
    Discarded, Duplicate, Evaluated, Failed, Queued, Retried, Screened, Stopped, Transition, Violated,
)
from mstar_ray.structure.index import StructureIndex
from mstar_ray.tasks.model import Task

# The seam with the pool: what a worker is called with, and what it returns (mstar_ray.search.work).
SearchPool = Pool[EvalJob | ReflectionRequest, EvalOutcome | ReflectionOutcome]
# A piece of the search's work: an evaluation (tagged with its Candidate) or a reflection (tagged with the
# FixRound a runtime fix stands on, or None); and what comes back for it.
SearchWork = Work[EvalJob | ReflectionRequest]
SearchDone = Done[EvalJob | ReflectionRequest, EvalOutcome | ReflectionOutcome]

MAX_DONORS = 6
MAX_RELATIVES = 3  # of the donors: those that gained by another line from an ancestor of the parent
# An evaluator that dies this many times on one candidate (each time after Ray's own restarts) does not get
# it again: the candidate is recorded as failed, here and on a resume.
MAX_CRASHES_PER_CANDIDATE = 2
WAIT_S = 1.0  # how long the loop waits for a result before it looks around (the live line, live.json)


def _not_handed_out(done: object) -> NoReturn:
    raise TypeError(f"the search policy got back work it never hands out: {done!r}")


class FatalRunError(RuntimeError):
    """The run cannot go on (an endpoint gone after its retries, a broken install); finished work is kept."""


def infrastructure_failure(cause: BaseException) -> bool:
    """Whether an error a worker raised is the infrastructure's (an endpoint gone, a machine that cannot sandbox
    or cannot run the task's environment: an ``InfrastructureError``), which stops a run; any other is the
    candidate's failure. A request that the program's own declarations made too large never gets here: the
    evaluation records it as the program's violation (``agent.evaluation``)."""
    return isinstance(cause, InfrastructureError)


@dataclasses.dataclass(frozen=True)
class EvaluationRecord:
    """What the logs keep of one search evaluation beside its transition (``Screened``, ``Violated`` or
    ``Evaluated``): the outcome, each question's split, and the candidate row's fitness fields."""

    outcome: EvalOutcome
    splits: dict[str, str]
    written: list[str]
    static_evidence: float | None = None
    interval: tuple[float, float] | None = None
    challenge: Challenge | None = None
    screen_score: float | None = None


class SearchObserver(Protocol):
    """What the driver attaches to see the search: the run directory and the live line (``driver.recorder``)."""

    def applied(self, transition: Transition, *, node_id: str | None = None,
                evaluation: EvaluationRecord | None = None) -> None:
        """A transition, just before the state applies it."""

    def started(self, candidate: Candidate, purpose: str, detail: str) -> None:
        """An evaluation was handed out."""

    def reflected(self, request: ReflectionRequest, outcome: ReflectionOutcome) -> None:
        """A reflection came back (its model calls), before its child or discard is applied."""

    def resumed(self, iteration: int, detail: str) -> None: ...

    def say(self, text: str) -> None:
        """A note for the person watching."""


class SearchPolicy:
    def __init__(self, config: RunConfig, task: Task, plan: SplitPlan, observer: SearchObserver, *,
                 evaluators: int, llm_spent: Callable[[], str | None]):
        """``llm_spent``: the LLM gateway's reason to stop (a spent budget), or None."""
        cfg = config.search
        self.config = config
        self.plan = plan
        self.observer = observer
        self.evaluators = evaluators
        self.state = SearchState()
        self.jobs = EvalJobs(task, plan, judge_all=cfg.judge_on == "all", attribute=cfg.attribution)
        self.incumbent = Incumbent(plan.split.static, seed=cfg.seed)
        self.cascade = (cascade_rule(cfg.cascade.rule, margin=cfg.cascade.margin, quantile=cfg.cascade.quantile)
                        if cfg.cascade is not None else None)
        if self.cascade is not None and not plan.split.screen:
            raise InputError("search.cascade is set but the split has no slice to screen on (split.screen)")
        self.parents = parent_rule(cfg.parent_selection, tau=cfg.tau, static_ids=plan.split.static,
                                   objectives=cfg.pareto.objectives, cost=cfg.pareto.cost)
        self.budget = BudgetCheck(stop_conditions(cfg.max_candidates, cfg.max_iterations, cfg.max_wall_s), llm_spent)
        self.structure = StructureIndex(cfg.structure_level)  # no structure is evaluated twice
        self.task_brief = family(task.family).brief  # what the reflector is told about how items are scored
        self.evidence = {unit: found.text for unit, found in task.evidence().items()}  # for failure cases
        # Work not in the state (a resume rebuilds it): queued candidates not yet handed out, runtime fixes not
        # yet started (each with where its fix will stand), open reflections a resume makes again, work whose
        # worker died (to a replacement), and work handed out.
        self.waiting: collections.deque[Candidate] = collections.deque()
        self.fixes: collections.deque[Work[ReflectionRequest]] = collections.deque()
        self.reissue: collections.deque[int] = collections.deque()
        self.retry: collections.deque[SearchWork] = collections.deque()
        self.flying: list[SearchWork] = []
        self.started = time.monotonic()
        self.steering = Steering(config)  # each reflection's model and instruction (search_loop.steering)

    def _act(self, transition: Transition, *, node_id: str | None = None,
             evaluation: EvaluationRecord | None = None) -> None:
        self.observer.applied(transition, node_id=node_id, evaluation=evaluation)
        self.state.apply(transition)

    # -------------------------------------------------------------------------------------- set-up

    def start(self, seeds: list[Candidate], restored: SearchState | None = None,
              stored_source: Callable[[str], str] | None = None) -> None:
        """Queue the seeds (on a resume: those a run killed early never queued) after the restored state, whose
        programs ``stored_source`` reads back by id."""
        if restored is not None:
            assert stored_source is not None, "a resume reads its queued programs back"
            self._restore(restored, stored_source)
        for seed in seeds:
            if restored is None or seed.id not in restored.seen:
                self._enqueue(seed)

    def _restore(self, restored: SearchState, stored_source: Callable[[str], str]) -> None:
        self.state = restored
        self.reissue = collections.deque(restored.reflections)
        self.steering.restored(restored)
        self.started -= restored.wall_s  # wall_s and max_wall_s count every process of the run
        pending = list(restored.pending.values())
        for candidate in pending:
            if restored.crashes[candidate.id] >= MAX_CRASHES_PER_CANDIDATE:
                self._failed(candidate, f"its evaluation crashed evaluators {restored.crashes[candidate.id]} times; "
                                        "not evaluated again")
            else:
                self.waiting.append(candidate)
        for known in restored.queued:
            self.structure.learn(known, stored_source(known))
        for member in restored.members:  # the incumbent, replayed in the order the run scored them
            self.incumbent.offer(member)
        self.observer.resumed(restored.iterations, f"{len(restored.members)} members, {len(pending)} candidates "
                                                   f"and {len(self.reissue)} reflections re-issued")

    # -------------------------------------------------------------------------------------- what next

    def drive(self, pool: SearchPool, between: Callable[[], None] = lambda: None) -> None:
        """The search loop: hand out work to idle workers and take back what finished, until nothing is in
        flight and nothing more may start; ``between`` runs after each wait (the live line)."""
        while True:
            for work in self.next_work(pool.idle("evaluate"), pool.idle("reflect")):
                pool.submit(work)
            if not pool.busy():
                return
            for done in pool.next_finished(WAIT_S):
                self.accept(done)
            between()

    def next_work(self, idle_evaluators: int, idle_reflectors: int) -> list[SearchWork]:
        """Work for the idle workers, in the order to hand it out; each is in flight until ``accept``."""
        issued: list[SearchWork] = []

        def issue(work: SearchWork) -> None:
            issued.append(work)
            self.flying.append(work)  # counted at once: the next request's budget check sees it

        for kind, idle in (("evaluate", idle_evaluators), ("reflect", idle_reflectors)):
            for work in [w for w in self.retry if w.kind == kind][:idle]:
                self.retry.remove(work)
                issue(work)
                idle -= 1
            while idle:
                new = self._next_evaluation() if kind == "evaluate" else self._next_reflection()
                if new is None:
                    break
                issue(new)
                idle -= 1
        return issued

    def _next_evaluation(self) -> SearchWork | None:
        if not self.waiting:
            return None
        candidate = self.waiting.popleft()
        if self.cascade is not None and candidate.id not in self.state.screen_scores:
            split = self.plan.split
            self.observer.started(candidate, "screen", f"screening: {len(split.screen_texts)} texts written, "
                                                       f"{len(split.screen)} static questions")
            return Work("evaluate", self.jobs.screen(candidate.id, candidate.source), candidate)
        written = self.plan.written(self.jobs.questions(candidate.iteration))
        extra = len(written) - len(self.plan.split.train_texts)
        self.observer.started(candidate, "search",
                              f"evaluation: {len(written)} texts written ({extra} for the rotating evidence)")
        return Work("evaluate", self.jobs.search(candidate.id, candidate.source, candidate.iteration), candidate)

    def _next_reflection(self) -> SearchWork | None:
        """A runtime fix first (its tag says where the fix will stand), then a reflection a resume re-issues,
        then a new one, each while the budgets allow it."""
        work: Work[ReflectionRequest]
        if self.fixes and self._budget_left():
            work = self.fixes.popleft()
        elif self.reissue:
            work = Work("reflect", self._reflection_request(self.reissue.popleft()))  # in flight when the run stopped
        elif self._may_reflect():
            work = Work("reflect", self._reflection_request(self.state.iterations + 1))
        else:
            return None
        self._act(self.steering.started(work.payload, self.state))
        return work

    def _in_flight(self, kind: str) -> list[SearchWork]:
        return [work for work in [*self.flying, *self.retry] if work.kind == kind]

    def _evaluating(self) -> list[Candidate]:
        """The candidates of the evaluations in flight: each evaluation's tag (``_next_evaluation``)."""
        return [work.tag for work in self._in_flight("evaluate") if isinstance(work.tag, Candidate)]

    def _children_pending(self) -> int:
        return len(self.waiting) + sum(1 for candidate in self._evaluating() if candidate.origin != "seed")

    def _budget_left(self) -> bool:
        count = SearchCount(committed=self.state.evaluated + self._children_pending() + len(self._in_flight("reflect")),
                            iterations=self.state.iterations, elapsed_s=time.monotonic() - self.started)
        return self.budget.allows(count)

    def _may_reflect(self) -> bool:
        """A new reflection starts once every seed is scored, while fewer children wait than there are evaluators
        and the budgets allow it."""
        seeds_pending = any(candidate.origin == "seed" for candidate in self._evaluating())
        if seeds_pending or any(c.origin == "seed" for c in self.waiting) or not len(self.state.population):
            return False
        return self._children_pending() < max(1, self.evaluators) and self._budget_left()

    def _reflection_request(self, iteration: int) -> ReflectionRequest:
        cfg = self.config.search
        rng = random.Random(f"{cfg.seed}:reflect:{iteration}")
        population = self.state.population
        parent = self.parents.choose(population, rng)
        hidden = self.plan.split.scoring()
        failures, success = sample_cases(parent.results, rng, self.evidence, hidden=hidden)
        # The best few only: sorting the whole population for them made each request cost n log n.
        best = heapq.nlargest(MAX_DONORS + 1, self.parents.donors(population), key=lambda m: m.score)
        donors = [m.source for m in best if m.id != parent.id]
        relatives = [Relative(id=m.id, source=m.source, origin=m.origin, parent=m.parent or "",
                              commit_message=m.commit_message, ancestor_id=a.id, ancestor_source=a.source,
                              gain=m.score - a.score)
                     for m, a in population.relatives(parent.id, best)[:MAX_RELATIVES]]
        return ReflectionRequest(
            task_brief=self.task_brief, parent_id=parent.id, parent_source=parent.source, parent_score=parent.score,
            lineage=self.state.lineage(parent), inert_parts=self.state.inert_parts(), failures=failures,
            stage_counts=stage_totals(shown_results(parent.results, hidden)),
            success=success, write_example=parent.write_example,
            donors=donors[:MAX_DONORS], relatives=relatives, known_ids=sorted(self.state.seen),
            frozen_code=cfg.frozen_code, frozen_instructions=cfg.frozen_instructions, seed=rng.randrange(2**31),
            iteration=iteration,
        )

    def stop_reason(self) -> StopReason:
        return self.budget.reason()

    def stopped(self) -> StopReason:
        reason = self.stop_reason()
        self._act(Stopped(reason=reason.kind, message=reason.message))
        return reason

    # -------------------------------------------------------------------------------------- results

    def accept(self, done: SearchDone) -> None:
        """What finished: a result, a worker that died under its work, or a worker that raised."""
        self.flying.remove(done.work)
        match done:
            case Finished(work=Work(kind="evaluate", tag=Candidate() as candidate),
                          value=EvalOutcome() as outcome) if outcome.purpose == "screen":
                self._screened(candidate, outcome)
            case Finished(work=Work(kind="evaluate", tag=Candidate() as candidate), value=EvalOutcome() as outcome):
                self._evaluated(candidate, outcome)
            case Finished(work=Work(kind="reflect", payload=ReflectionRequest() as request,
                                    tag=FixRound() | None as fix), value=ReflectionOutcome() as reflection):
                self.observer.reflected(request, reflection)
                if (rewritten := self.steering.finished(request, reflection, self.state)) is not None:
                    self._act(rewritten)
                self._reflected(request, reflection.result, fix)
            case Crashed():
                self._crashed(done)
            case Raised():
                self._raised(done)
            case _:
                _not_handed_out(done)

    def _crashed(self, done: Crashed[EvalJob | ReflectionRequest]) -> None:
        work = done.work
        candidate = work.tag if work.kind == "evaluate" and isinstance(work.tag, Candidate) else None
        what = "evaluation" if work.kind == "evaluate" else "reflection"
        self.observer.say(f"a {what} worker died ({done.error[:200]}); replacing it and re-issuing its work")
        self._act(Retried(candidate=candidate.id if candidate else None, work=what, error=done.error[:2000]))
        if candidate is not None and self.state.crashes[candidate.id] >= MAX_CRASHES_PER_CANDIDATE:
            self._failed(candidate, f"evaluators died {self.state.crashes[candidate.id]} times on it: {done.error}")
        else:
            self.retry.append(work)

    def _raised(self, done: Raised[EvalJob | ReflectionRequest]) -> None:
        """A budget spent stops the run; an infrastructure error ends it; any other error is the failure of that
        one candidate (or reflection), and the search goes on."""
        cause = done.error
        if isinstance(cause, BudgetExceeded):
            self.budget.spend(str(cause))
            self.observer.say(f"stopping: {cause}; the work in flight is abandoned, nothing half-written")
            return
        if infrastructure_failure(cause):
            raise FatalRunError(str(cause)) from None
        error = f"{type(cause).__name__}: {cause}"
        match done.work:
            case Work(kind="evaluate", tag=Candidate() as candidate):
                self._failed(candidate, f"its evaluation raised {error}")
            case Work(payload=ReflectionRequest() as request, tag=FixRound() | None as fix):
                self._reflected(request, Discard(parent=request.parent_id,
                                                 reason=f"the reflection raised {error}"[:2000], attempts=0, errors=[]),
                                fix)
            case _:
                _not_handed_out(done)

    def _failed(self, candidate: Candidate, error: str) -> None:
        """Recorded as this candidate's failure; counted like an evaluation, so budgets still move on."""
        self.observer.say(f"{candidate.id} could not be evaluated: {error[:300]}")
        self._act(Failed(candidate=candidate, error=error))

    def _violated(self, candidate: Candidate, evaluation: EvaluationRecord) -> None:
        report = evaluation.outcome.report
        v = report.violation
        assert v is not None, "only a report with a violation is recorded as one"  # both callers check it
        self.observer.say(f"{candidate.id} broke the contract during {v.phase}: [{v.kind}] {v.message[:200]}")
        self._act(Violated(candidate=candidate, kind=v.kind), node_id=evaluation.outcome.node_id, evaluation=evaluation)
        if candidate.origin != "seed":
            self._maybe_fix(candidate, report)

    def _screened(self, candidate: Candidate, outcome: EvalOutcome) -> None:
        """The slice scored: the program goes on to its full evaluation next, or it is screened out (logged with
        its slice score, and its parent's history says why)."""
        split = self.plan.split
        evaluation = EvaluationRecord(outcome, {q: "screen" for q in split.screen}, written=split.screen_texts)
        if outcome.report.violation is not None:
            self._violated(candidate, evaluation)
            return
        scores = self.state.screen_scores
        assert self.cascade is not None, "a program is screened only under a cascade"  # _next_evaluation
        bar = None if candidate.origin == "seed" else self.cascade.bar(
            scores.get(candidate.parent) if candidate.parent is not None else None,
            [scores[m.id] for m in self.state.members if m.id in scores])
        answers = answers_of(outcome.report.results)
        # A child that answers the slice as its parent did most likely changed nothing the agent acts on: the
        # full evaluation would score its parent again, so it costs the slice alone.
        repeats = (candidate.origin != "seed" and candidate.parent is not None
                   and same_answers(answers, self.state.screen_answers.get(candidate.parent, {})))
        passed = passes(outcome.static_score, bar) and not repeats
        self._act(Screened(candidate=candidate, score=outcome.static_score, bar=bar, passed=passed,
                           answers=answers if passed else {}, repeats_parent=repeats),
                  node_id=outcome.node_id, evaluation=evaluation)
        if passed:
            self.waiting.appendleft(candidate)  # its full evaluation next: nothing waits on a program half-scored
        elif repeats:
            self.observer.say(f"{candidate.id} screened out: on the slice it answers each question as its parent "
                              f"{candidate.parent} did")
        else:
            self.observer.say(f"{candidate.id} screened out: {outcome.static_score:.3f} on the slice, below "
                              f"the {bar:.3f} it needed")

    def _evaluated(self, candidate: Candidate, outcome: EvalOutcome) -> None:
        report = outcome.report
        rotating = {q: "rotating" for q in set(self.plan.rotating(candidate.iteration)) - set(self.plan.split.static)}
        written = self.plan.written(self.jobs.questions(candidate.iteration))
        evaluation = EvaluationRecord(outcome, rotating, written=written,
                                      static_evidence=self.plan.evidence_share(written, self.plan.split.static)[0])
        if report.violation is not None:
            self._violated(candidate, evaluation)
            return
        tokens = sum(u.prompt_tokens + u.completion_tokens for u in report.llm.values())
        member = Member(**candidate.identity(), score=outcome.static_score, results=report.results,
                        write_example=report.write_example, tokens=tokens)
        challenge = self.incumbent.offer(member)
        if challenge.verdict == "replaces" and candidate.origin != "seed":
            self.observer.say(f"{member.id} is the new best: static {member.score:.3f}, {challenge.lead:+.3f} "
                              f"[{challenge.low:+.3f}, {challenge.high:+.3f}] on {challenge.incumbent}")
        evaluation = dataclasses.replace(evaluation, interval=self.incumbent.interval(member), challenge=challenge,
                                         screen_score=self.state.screen_scores.get(candidate.id))
        self._act(Evaluated(candidate=candidate, score=outcome.static_score, results=report.results,
                            write_example=report.write_example, tokens=tokens),
                  node_id=outcome.node_id, evaluation=evaluation)

    def _maybe_fix(self, candidate: Candidate, report: EvalReport) -> None:
        cfg = self.config.search
        if not cfg.runtime_fix or candidate.fix_round >= cfg.max_repairs or not reflector_class(cfg.reflector).fixes_runtime:
            return
        assert candidate.parent is not None, "only a child is fixed, never a seed"  # _violated checks its origin
        parent = self.state.population.get(candidate.parent)
        v = report.violation
        assert v is not None, "only a report with a violation is fixed"  # _violated's
        request = ReflectionRequest(
            kind="runtime_fix", task_brief=self.task_brief, parent_id=candidate.id, parent_source=candidate.source,
            parent_score=0.0, violation=fix_report(v, candidate.source),
            known_ids=sorted(self.state.seen), frozen_code=cfg.frozen_code, frozen_instructions=cfg.frozen_instructions,
            seed=candidate.fix_round, lineage=self.state.lineage(parent), iteration=candidate.iteration,
        )
        # the fix stands where the violated child stood: its parent's child, one round further
        self.fixes.append(Work("reflect", request, FixRound(round=candidate.fix_round + 1, parent=parent.id,
                                                            iteration=candidate.iteration)))

    def _reflected(self, request: ReflectionRequest, result: Child | Discard, fix: FixRound | None) -> None:
        if isinstance(result, Discard):
            self._act(Discarded(parent=request.parent_id, kind=request.kind, iteration=request.iteration,
                                reason=result.reason, attempts=result.attempts, errors=result.errors))
            return
        lineage = ({"parent": fix.parent, "iteration": fix.iteration, "origin": "runtime-fix"} if fix else {})
        self._enqueue(Candidate(**{**result.identity(), **lineage}, fix_round=fix.round if fix else 0,
                                patch=result.patch, edit_format=result.edit_format, tolerances=result.tolerances))

    def _enqueue(self, candidate: Candidate) -> None:
        if candidate.id in self.state.seen:
            self._duplicate(candidate, candidate.id, "identical")
            return
        placement = self.structure.place(candidate.source, candidate.parent)
        candidate.structural_key = placement.key
        candidate.novelty_parent, candidate.novelty_population = placement.to_parent, placement.to_population
        if self.config.search.dedup and placement.duplicate_of is not None and candidate.origin != "seed":
            self._duplicate(candidate, placement.duplicate_of, "structurally identical (layout, comments or docstrings differ)")
            return
        self.structure.add(candidate.id, placement)
        self._act(Queued(candidate=candidate))
        self.waiting.append(candidate)

    def _duplicate(self, candidate: Candidate, original: str, how: str) -> None:
        """Not evaluated again: the child's row and its parent's history carry the original's score."""
        score = self.state.score_of(original)
        self.observer.say(duplicate_message(candidate, original, how))
        self._act(Duplicate(candidate=candidate, original=original, how=how, score=score))


def duplicate_message(candidate: Candidate, original: str, how: str) -> str:
    """The live line's note on a child not evaluated again. A child whose id is already known has the very
    source of an earlier program (the id is its hash), so it names where it came from, not its id twice."""
    origin = f"the child of {candidate.parent}" if candidate.parent else "a seed"
    if candidate.id == original:
        return f"{origin} (iteration {candidate.iteration}) repeats {original} exactly; not evaluated again"
    return f"{origin} (iteration {candidate.iteration}), {candidate.id}, is {how} to {original}; not evaluated again"
