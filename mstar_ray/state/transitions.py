"""The search's transitions: every change of its state, typed, as the driver applies and logs it and as a
resume replays it from the logs (``mstar_ray.state.search_state`` applies them; ``replay`` reads them back).

One transition is one ``events`` row. What a row cannot hold (a program's source, its per-question results)
lives in ``programs/`` and ``results``, found by the candidate's id.
"""

from __future__ import annotations

from typing import Literal
from typing import Any

from pydantic import BaseModel, ConfigDict

from mstar_ray.results import ItemResult
from mstar_ray.search.stop import StopKind
from mstar_ray.state.candidate import Candidate

ReflectionKind = Literal["improve", "runtime_fix"]


class _Transition(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Queued(_Transition):
    """A new program enters the evaluation queue (a seed, or a reflection's child that is no duplicate)."""

    candidate: Candidate


class ReflectionStarted(_Transition):
    iteration: int
    kind: ReflectionKind
    # An ensemble's choice of reflector model and why (mstar_ray.reflect.ensemble); none with one model or none.
    model: str | None = None
    reason: str | None = None
    guidance: str | None = None  # the id of the instruction drawn for it (search.guidance)


class GuidanceRewritten(_Transition):
    """Evolving instructions' meta-step: the worst instruction ``replaced`` gives way to ``text`` (id ``by``),
    written from the best by the reflection of ``iteration``."""

    replaced: str
    by: str
    text: str
    iteration: int


class Evaluated(_Transition):
    """A search evaluation without a violation: the program joins the population."""

    candidate: Candidate
    score: float  # the static score, the fitness
    results: list[ItemResult]
    write_example: dict[str, Any] | None = None
    tokens: int = 0  # what its evaluation's model calls took (Pareto selection's cost objective)


class Screened(_Transition):
    """A program's first evaluation under the cascade (search.cascade), on the slice of the static set: it goes on
    to its full evaluation, or it is screened out and never enters the population."""

    candidate: Candidate
    score: float  # its mean over the slice
    bar: float | None  # the slice score it needed (mstar_ray.search.cascade); None: nothing to compare with
    passed: bool
    # By slice question id, its answer: a child of it that gives the same to each is screened out unscored.
    answers: dict[str, str] = {}
    repeats_parent: bool = False  # screened out for answering each slice question as its parent did


class Violated(_Transition):
    """The program broke the contract while it ran: it scores zero and stays out of the population."""

    candidate: Candidate
    kind: str


class Failed(_Transition):
    """The evaluation broke down (an evaluator raised, or kept dying on it), not the program."""

    candidate: Candidate
    error: str


class Duplicate(_Transition):
    """A child equal to a program already known (the same source, or the same structure): not evaluated."""

    candidate: Candidate
    original: str
    how: str
    score: float | None  # the original's static score, None while it is still being evaluated


class Discarded(_Transition):
    """A reflection that gave no valid child."""

    parent: str
    kind: ReflectionKind
    iteration: int
    reason: str
    attempts: int
    errors: list[str]


class Retried(_Transition):
    """An actor died under its work, which went to a replacement (``candidate``: the evaluation's, if any)."""

    candidate: str | None
    work: Literal["evaluation", "reflection"]
    error: str


class Stopped(_Transition):
    reason: StopKind
    message: str


Transition = (Queued | ReflectionStarted | Screened | Evaluated | Violated | Failed | Duplicate | Discarded | Retried
              | Stopped | GuidanceRewritten)
