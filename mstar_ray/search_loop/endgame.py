"""The end of a search: the confirmation of a contender, the choice of the run's program, its test beside the best
seed's, and the fallback to the next program when the chosen one fails there. Ray-free like the policy, and driven
the same way (through a ``Pool`` and a ``between`` callback, as ``SearchPolicy.drive``), with the search's handling
of what comes back: a worker that raised is that candidate's failure unless the infrastructure raised it, and an
evaluator that dies under the same candidate ``MAX_CRASHES_PER_CANDIDATE`` times makes it a failure too.

No program ends the run here: one that fails or breaks the contract in any phase and position (the incumbent, the
contender, the best seed, the chosen program, the fallback) is recorded with why, passed over, and named in the
selection; the run ends with a program and its summary.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from mstar_ray.llm.errors import BudgetExceeded
from mstar_ray.search.jobs import EvalOutcome, Purpose
from mstar_ray.search.jobs import EvalJob
from mstar_ray.reflect.request import ReflectionRequest
from mstar_ray.search.population import Member
from mstar_ray.search.selection import Confirmation, Selection
from mstar_ray.search.work import Crashed, Raised, Work
from mstar_ray.search_loop.policy import (
    MAX_CRASHES_PER_CANDIDATE, WAIT_S, FatalRunError, SearchPolicy, SearchPool, infrastructure_failure,
)
from mstar_ray.state.search_state import SearchState

# Programs tested in turn after the chosen one broke the contract (or failed) on the test, each the next by the
# selection rule without those before it: a poisoned choice costs a few test evaluations, never the run.
MAX_TEST_FALLBACKS = 3


class EndgameObserver(Protocol):
    """What the driver attaches to see the end of a search (``driver.recorder.RunRecorder``)."""

    def say(self, text: str) -> None: ...

    def phase(self, name: str, search: SearchState) -> None:
        """The live line's phase changed."""

    def side_evaluated(self, member: Member, outcome: EvalOutcome, splits: dict[str, str]) -> None:
        """A confirmation or test evaluation came back (logged as results and an event, no candidate row)."""

    def side_failed(self, member_id: str, purpose: str, error: str) -> None:
        """A confirmation or test evaluation raised, or crashed its evaluators too often: no result."""

    def side_retried(self, member_id: str, purpose: str, error: str) -> None:
        """An evaluator died under a confirmation or test evaluation; it is handed out again."""

    def chosen(self, member_id: str, selection: Selection) -> None: ...


@dataclass
class Ending:
    best: Member
    best_seed: Member
    selection: Selection  # how the best was chosen, naming what was passed over
    tests: dict[str, EvalOutcome] = field(default_factory=dict)  # by member id, on the held-out questions
    failures: dict[str, str] = field(default_factory=dict)  # by member id: why its confirmation or test failed


class Endgame:
    def __init__(self, policy: SearchPolicy, observer: EndgameObserver, *, test_texts: list[str]):
        """``test_texts``: the texts the test writes (every text, or those a run bounds its test to)."""
        self.policy = policy
        self.observer = observer
        self.test_texts = test_texts
        self.crashes: collections.Counter[tuple[str, str]] = collections.Counter()  # by (member, purpose)

    def run(self, pool: SearchPool, between: Callable[[], None] = lambda: None) -> Ending:
        population = self.policy.state.population
        if not len(population):
            raise FatalRunError("no seed program could be evaluated without a runtime violation")
        spent = self.policy.stop_reason().spent
        disqualified: dict[str, str] = {}  # by member id: why it cannot be the run's program
        confirmation = None if spent else self._confirmation(pool, between, disqualified)
        selection = self._select(confirmation, disqualified) or self._every_one_passed_over(disqualified)
        self.observer.chosen(selection.chosen, selection)
        seeds = [m for m in population.members if m.origin == "seed"]
        best_seed = max(seeds, key=lambda m: m.score) if seeds else population.get(selection.chosen)
        ending = Ending(best=population.get(selection.chosen), best_seed=best_seed, selection=selection,
                        failures=dict(disqualified))
        if self.policy.plan.split.test and not spent:
            self.observer.phase("testing the best", self.policy.state)
            self._test(pool, between, ending, disqualified)
        return ending

    # ------------------------------------------------------------------------------------------ evaluations

    def _evaluate(self, pool: SearchPool, between: Callable[[], None], members: list[Member], purpose: Purpose,
                  question_ids: list[str], texts: list[str]) -> tuple[dict[str, EvalOutcome], dict[str, str]]:
        """Evaluations outside the search, handed to the pool like the search's. A program that learns from
        feedback gets it on the static questions first (``EvalJobs.after_search``); those answers are neither
        scored nor logged here. Returns the outcomes and, by member, why one has none or broke the contract."""
        jobs = self.policy.jobs
        waiting: collections.deque[Work[EvalJob | ReflectionRequest]] = collections.deque(
            Work("evaluate", jobs.after_search(m.id, m.source, purpose, question_ids, texts), m) for m in members)
        outcomes: dict[str, EvalOutcome] = {}
        failures: dict[str, str] = {}
        while waiting or pool.busy():
            while waiting and pool.idle("evaluate"):
                pool.submit(waiting.popleft())
            for done in pool.next_finished(WAIT_S):
                member = done.work.tag
                if not isinstance(member, Member):  # each evaluation here is tagged with its member (above)
                    raise TypeError(f"the end of the run got back work it never hands out: {done!r}")
                if isinstance(done, Crashed):
                    self.crashes[member.id, purpose] += 1
                    crashes = self.crashes[member.id, purpose]
                    if crashes >= MAX_CRASHES_PER_CANDIDATE:
                        failures[member.id] = self._failed(member.id, purpose, f"evaluators died {crashes} times "
                                                                               f"under its {purpose}: {done.error}")
                    else:
                        self.observer.side_retried(member.id, purpose, done.error[:2000])
                        waiting.append(done.work)
                elif isinstance(done, Raised):
                    failures[member.id] = self._raised(member.id, purpose, done.error)
                else:
                    job, value = done.work.payload, done.value
                    if not isinstance(job, EvalJob) or not isinstance(value, EvalOutcome):
                        raise TypeError(f"the end of the run got back work it never hands out: {done!r}")
                    outcome = value.model_copy(update={"report": value.report.without(job.feedback_ids)})
                    outcomes[member.id] = outcome
                    split = "test" if purpose == "test" else "confirmation"
                    self.observer.side_evaluated(member, outcome, {q: split for q in question_ids})
                    violation = outcome.report.violation
                    if violation is not None:
                        failures[member.id] = why = (f"it broke the contract during the {purpose} ({violation.phase}): "
                                                     f"[{violation.kind}] {violation.message}")[:2000]
                        self.observer.say(f"{member.id}: {why[:300]}")
            between()
        return outcomes, failures

    def _raised(self, member_id: str, purpose: str, cause: BaseException) -> str:
        """As in the search: a spent budget stops what follows (no program's doing), the infrastructure's error
        ends the run, any other is this program's failure."""
        if isinstance(cause, BudgetExceeded):
            self.policy.budget.spend(str(cause))
            self.observer.say(f"stopping: {cause}")
            return f"its {purpose} was cut short: {cause}"[:2000]
        if infrastructure_failure(cause):
            raise FatalRunError(f"the {purpose} evaluation of {member_id} raised {type(cause).__name__}: {cause}")
        return self._failed(member_id, purpose, f"its {purpose} evaluation raised {type(cause).__name__}: {cause}")

    def _failed(self, member_id: str, purpose: str, error: str) -> str:
        error = error[:2000]
        self.observer.say(f"{member_id}: {error[:300]}")
        self.observer.side_failed(member_id, purpose, error)
        return error

    # ------------------------------------------------------------------------------------------ the choice

    def _confirmation(self, pool: SearchPool, between: Callable[[], None],
                      disqualified: dict[str, str]) -> Confirmation | None:
        """The incumbent and the strongest contender (higher static score, within the noise) on the
        confirmation slice; None when there is nothing to confirm or no slice to do it on, or when either broke
        the contract or failed there (it goes into ``disqualified``, with why)."""
        incumbent = self.policy.incumbent
        contender = incumbent.contender()
        questions = self.policy.plan.split.confirmation
        if contender is None or contender.verdict == "replaces" or not questions:
            return None
        assert incumbent.best is not None, "a contender is set against a best"  # contender() is None without one
        pair = [incumbent.best, self.policy.state.population.get(contender.challenger)]
        self.observer.phase("confirming", self.policy.state)
        self.observer.say(f"confirming: {pair[1].id} scored {contender.lead:+.3f} above the best {pair[0].id}, "
                          f"within the noise; both on {len(questions)} fresh validation questions")
        outcomes, failures = self._evaluate(pool, between, pair, "confirm", questions,
                                            self.policy.plan.written(questions))
        if failures:
            if not self.policy.stop_reason().spent:  # a budget spent under it is no program's doing
                disqualified.update(failures)
            return None
        return Confirmation(incumbent=pair[0].id, contender=pair[1].id, questions=len(questions),
                            incumbent_score=outcomes[pair[0].id].static_score,
                            contender_score=outcomes[pair[1].id].static_score)

    def _select(self, confirmation: Confirmation | None, disqualified: dict[str, str]) -> Selection | None:
        """The selection rule over every program but the ``disqualified`` (None when it leaves none), its ``how``
        saying which were passed over and why."""
        if not disqualified:
            return self.policy.incumbent.select(confirmation)
        incumbent = self.policy.incumbent.without(set(disqualified))
        if incumbent is None:
            return None
        if confirmation is not None and {confirmation.incumbent, confirmation.contender} & set(disqualified):
            confirmation = None
        try:
            selection = incumbent.select(confirmation)
        except ValueError:  # the confirmation was of another pair than this incumbent's
            selection = incumbent.select(None)
        return selection.model_copy(update={"how": f"{selection.how} ({passed_over(disqualified)})"})

    def _every_one_passed_over(self, disqualified: dict[str, str]) -> Selection:
        """Every program failed after the search: the search's own choice stands, and the selection says so."""
        selection = self.policy.incumbent.select(None)
        return selection.model_copy(update={"how": f"{selection.how}; every program failed after the search, so "
                                                   f"this one stands ({passed_over(disqualified)})"})

    def _test(self, pool: SearchPool, between: Callable[[], None], ending: Ending,
              disqualified: dict[str, str]) -> None:
        """The chosen program and the best seed on the test questions. A chosen program that breaks the contract
        or fails there gives way to the next one by the selection rule, tested in turn (up to
        ``MAX_TEST_FALLBACKS``): the run still ends with a tested program, and the selection says why."""
        population = self.policy.state.population
        questions = self.policy.plan.split.test
        fallbacks = 0
        while True:
            wanted = [ending.best] if fallbacks else [ending.best, ending.best_seed]
            members = list({m.id: m for m in wanted if m.id not in ending.tests and m.id not in ending.failures}
                           .values())  # the best may be the best seed
            if members:
                outcomes, failed = self._evaluate(pool, between, members, "test", questions, self.test_texts)
                ending.tests.update(outcomes)
                ending.failures.update(failed)
            best = ending.best.id
            # The budget spent under the test is no program's doing: nothing more is tested then.
            if best not in ending.failures or fallbacks == MAX_TEST_FALLBACKS or self.policy.stop_reason().spent:
                return
            disqualified[best] = ending.failures[best]
            fallback = self._select(None, disqualified)
            if fallback is None:
                return
            self.observer.say(f"{best} cannot be the final program ({ending.failures[best][:200]}); the next by "
                              f"the selection rule is {fallback.chosen}")
            ending.selection, ending.best, fallbacks = fallback, population.get(fallback.chosen), fallbacks + 1
            self.observer.chosen(fallback.chosen, fallback)


def passed_over(disqualified: dict[str, str]) -> str:
    return "; ".join(f"{member} was passed over: {why}" for member, why in disqualified.items())
