"""When a search starts no new reflection: its budgets as small stop conditions, each asked in turn.

Ray-free and pure, so the rules read (and test) without a driver: the driver hands each condition a
``SearchCount`` and stops starting reflections at the first that gives a reason. A spent money or token
budget is not here: the LLM gateway reports it, since only the gateway sees every call of the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

# Without max_iterations, reflections stop at this many per wanted child: a reflector whose children are
# all discarded or duplicates must not spin (and spend) for ever.
REFLECTIONS_PER_CANDIDATE = 5


StopKind = Literal["max_candidates", "max_iterations", "reflections_per_candidate", "max_wall_s", "llm_budget",
                   "exhausted"]


@dataclass(frozen=True)
class StopReason:
    """Why the search started no more reflections: a kind the code acts on, and the words the user reads."""

    kind: StopKind
    message: str

    @property
    def spent(self) -> bool:
        """The LLM budget is gone: nothing more may be asked of a model (no confirmation, no test)."""
        return self.kind == "llm_budget"

    def __str__(self) -> str:
        return self.message


# The search ran out of parents that give a valid child before any budget.
EXHAUSTED = StopReason("exhausted", "no parent could give a valid child")


@dataclass(frozen=True)
class SearchCount:
    committed: int  # children evaluated, queued, being evaluated, or being reflected on
    iterations: int  # reflections started
    elapsed_s: float  # wall time of the run, over every process of it


class StopCondition(Protocol):
    def reached(self, count: SearchCount) -> StopReason | None:
        """Why no new reflection may start, or None."""


@dataclass(frozen=True)
class MaxCandidates:
    limit: int

    def reached(self, count: SearchCount) -> StopReason | None:
        if count.committed < self.limit:
            return None
        return StopReason("max_candidates", f"max_candidates ({self.limit}) reached")


@dataclass(frozen=True)
class MaxIterations:
    limit: int

    def reached(self, count: SearchCount) -> StopReason | None:
        if count.iterations < self.limit:
            return None
        return StopReason("max_iterations", f"max_iterations ({self.limit}) reached")


@dataclass(frozen=True)
class ReflectionsPerCandidate:
    """The cap that stands in for max_iterations when only max_candidates is set."""

    candidates: int

    def reached(self, count: SearchCount) -> StopReason | None:
        if count.iterations < REFLECTIONS_PER_CANDIDATE * self.candidates:
            return None
        return StopReason("reflections_per_candidate",
                          f"{count.iterations} reflections gave fewer than max_candidates ({self.candidates}) children "
                          "to evaluate (discards and duplicates); set max_iterations to allow more")


@dataclass(frozen=True)
class MaxWall:
    seconds: float

    def reached(self, count: SearchCount) -> StopReason | None:
        if count.elapsed_s < self.seconds:
            return None
        return StopReason("max_wall_s", f"max_wall_s ({self.seconds:g} s) reached")


def stop_conditions(max_candidates: int | None, max_iterations: int | None,
                    max_wall_s: float | None) -> list[StopCondition]:
    """A run's budgets (``search.max_*``), in the order they are asked."""
    conditions: list[StopCondition] = []
    if max_candidates is not None:
        conditions.append(MaxCandidates(max_candidates))
    if max_iterations is not None:
        conditions.append(MaxIterations(max_iterations))
    elif max_candidates is not None:
        conditions.append(ReflectionsPerCandidate(max_candidates))
    if max_wall_s is not None:
        conditions.append(MaxWall(max_wall_s))
    return conditions


def first_reached(conditions: Sequence[StopCondition], count: SearchCount) -> StopReason | None:
    return next((reason for condition in conditions if (reason := condition.reached(count))), None)


class BudgetCheck:
    """The run's budgets as the policy asks them before each new reflection, and why the search stopped starting
    them: a spent LLM budget (``llm_spent``: the gateway's reason, or None) ends the run at once; a reached stop
    condition only keeps new reflections from starting."""

    def __init__(self, conditions: Sequence[StopCondition], llm_spent: Callable[[], str | None]):
        self.conditions = list(conditions)
        self.llm_spent = llm_spent
        self.spent: StopReason | None = None  # ends the run now
        self.reached: StopReason | None = None  # kept the last new reflection from starting

    def allows(self, count: SearchCount) -> bool:
        """Whether a new reflection may start; else remembers which budget stopped it."""
        spent = self.llm_spent()
        if spent:
            self.spend(spent)
            return False
        reached = first_reached(self.conditions, count)
        if reached:
            self.reached = reached
            return False
        return self.spent is None

    def spend(self, message: str) -> None:
        self.spent = StopReason("llm_budget", message)

    def reason(self) -> StopReason:
        return self.spent or self.reached or EXHAUSTED
