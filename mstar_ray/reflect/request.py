"""What a reflector is asked: the wire message from the driver to a reflector actor, and how the driver
fills it from the population (lineage, failure cases sampled with weight 1 - score, one success case)."""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import BaseModel

from mstar_ray.families.qa import QuestionAnswering
from mstar_ray.results import ItemResult

MAX_FAILURES = 3
CASE_CONTEXT_CHARS = 1200
CASE_ANSWER_CHARS = 1200  # of what was expected and produced: short answers whole, a full response's start
CASE_TRACE_CHARS = 2000
# How the notes of children tried from a parent say that an attempt changed nothing, or repeated a program
# (the reflector's check errors and the driver's duplicate notes use these words; the prompt counts them).
NO_CHANGE = "the change leaves the program as it was"
ALREADY_EVALUATED = "already evaluated"


class Case(BaseModel):
    question: str
    expected: str
    prediction: str
    score: float
    query: dict[str, Any] | None = None
    context: str = ""
    error: str | None = None
    trace: str = ""  # what happened beyond the answer (an episode's steps, a rubric's verdicts)


class LineageEntry(BaseModel):
    id: str
    relation: Literal["ancestor", "parent", "child"]
    commit_message: str
    score: float | None = None  # None: discarded before evaluation
    delta: float | None = None  # against the parent of the entry
    note: str = ""  # e.g. why a child was discarded
    changed: list[str] = []  # the parts of its parent a child changed ("KnowledgeBase.read", "TOP_K")


class ReflectionRequest(BaseModel):
    kind: Literal["improve", "runtime_fix"] = "improve"
    # How the task's family uses read() and scores the agent; question answering, as Task.family defaults to.
    task_brief: str = QuestionAnswering.brief
    parent_id: str
    parent_source: str
    parent_score: float
    lineage: list[LineageEntry] = []
    failures: list[Case] = []
    success: Case | None = None
    write_example: dict[str, Any] | None = None
    violation: str | None = None  # runtime_fix: what the program did wrong, with its traceback
    donors: list[str] = []  # other population sources, for crossover by the offline reflector
    known_ids: list[str] = []  # programs already evaluated: a child equal to one of them is no child
    frozen_code: bool = False
    frozen_instructions: bool = False
    seed: int = 0  # for the offline reflector's random choices
    iteration: int = 0  # the search iteration this reflection belongs to (its child carries it)


def as_case(result: ItemResult) -> Case:
    return Case(
        question=result.question, expected=result.expected[:CASE_ANSWER_CHARS],
        prediction=result.prediction[:CASE_ANSWER_CHARS], score=result.score,
        query=result.query, context=result.context[:CASE_CONTEXT_CHARS], error=result.error,
        trace=result.trace[:CASE_TRACE_CHARS],
    )


def sample_cases(results: list[ItemResult], rng: random.Random) -> tuple[list[Case], Case | None]:
    """Up to three failures (score < 1) drawn without replacement with weight 1 - score, and the best
    success (the highest-scoring answer above 0), so the reflector sees what works as well."""
    failures = [r for r in results if r.score < 1.0]
    chosen: list[ItemResult] = []
    while failures and len(chosen) < MAX_FAILURES:
        pick = rng.choices(range(len(failures)), weights=[1.0 - r.score for r in failures], k=1)[0]
        chosen.append(failures.pop(pick))
    successes = [r for r in results if r.score > 0.0 and r not in chosen]
    success = max(successes, key=lambda r: r.score) if successes else None
    return [as_case(r) for r in chosen], as_case(success) if success else None
