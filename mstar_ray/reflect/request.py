"""What a reflector is asked: the wire message from the driver to a reflector actor, and how the driver
fills it from the population (lineage, failure cases, one success case). Failure cases are sampled with
weight 1 - score; where failures are attributed to a stage (``mstar_ray.agent.attribution``), stratified by
stage and category instead, as MemSteer found better: each class gets a case before any gets a second."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel

from mstar_ray.contract import REQUIRED_CONSTANTS
from mstar_ray.families.qa import QuestionAnswering
from mstar_ray.reflect.guidance import Rewrite
from mstar_ray.results import ItemResult

MAX_FAILURES = 3
CASE_CONTEXT_CHARS = 1200
CASE_ANSWER_CHARS = 1200  # of what was expected and produced: short answers whole, a full response's start
CASE_TRACE_CHARS = 2000
EVIDENCE_CHARS = 400  # of each missing evidence unit, in a case
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
    stage: str | None = None  # where the memory failed: answering, retrieval, storage, not_written
    missing_evidence: list[str] = []  # the words of the evidence that did not reach read()'s output


class LineageEntry(BaseModel):
    id: str
    relation: Literal["ancestor", "parent", "child"]
    commit_message: str
    score: float | None = None  # None: discarded before evaluation
    delta: float | None = None  # against the parent of the entry
    note: str = ""  # e.g. why a child was discarded
    changed: list[str] = []  # the parts of its parent a child changed ("KnowledgeBase.read", "TOP_K")


class Relative(BaseModel):
    """A program of another line than the parent's, with the common ancestor it gained over: what the offline
    reflector's ``merge_relative`` may take into the parent, and what a model reflector's history names."""

    id: str
    source: str
    origin: str  # how it was made (``mutation:<kind>`` for an offline child)
    parent: str  # its own parent: the ancestor itself when it is one edit from it
    commit_message: str
    ancestor_id: str
    ancestor_source: str
    gain: float  # its static score over the ancestor's


def inert_parts(entries: Iterable[LineageEntry], at_least: int = 1) -> set[str]:
    """The parts of programs (``LineageEntry.changed``) that at least ``at_least`` scored children changed without
    moving their score at all (a delta of exactly 0) and no scored child changed with its score moving: where
    the failures do not come from. The four prompts are one part: an agent that ignored one rewording reads
    them all the same way."""
    prompts = "the four prompts"
    still: Counter[str] = Counter()
    moved: set[str] = set()
    for entry in entries:
        if entry.relation != "child" or entry.delta is None:
            continue
        parts = {prompts if part in REQUIRED_CONSTANTS else part for part in entry.changed}
        if abs(entry.delta) < 1e-9:
            still.update(parts)
        else:
            moved |= parts
    inert = {part for part, n in still.items() if n >= at_least and part not in moved}
    return (inert - {prompts}) | set(REQUIRED_CONSTANTS) if prompts in inert else inert


class ReflectionRequest(BaseModel):
    kind: Literal["improve", "runtime_fix"] = "improve"
    # How the task's family uses read() and scores the agent; question answering, as Task.family defaults to.
    task_brief: str = QuestionAnswering.brief
    parent_id: str
    parent_source: str
    parent_score: float
    lineage: list[LineageEntry] = []
    # Parts that children across the whole run changed, never moving a score (``inert_parts``): a lesson of the
    # run, not of this line of programs alone.
    inert_parts: list[str] = []
    failures: list[Case] = []
    stage_counts: dict[str, int] = {}  # the parent's attributed failures by stage (none: not attributed)
    success: Case | None = None
    write_example: dict[str, Any] | None = None
    violation: str | None = None  # runtime_fix: what the program did wrong, with its traceback
    donors: list[str] = []  # other population sources, for crossover by the offline reflector
    relatives: list[Relative] = []  # programs of other lines that gained over an ancestor of the parent
    known_ids: list[str] = []  # programs already evaluated: a child equal to one of them is no child
    frozen_code: bool = False
    frozen_instructions: bool = False
    seed: int = 0  # for the offline reflector's random choices
    iteration: int = 0  # the search iteration this reflection belongs to (its child carries it)
    model: str | None = None  # which of an ensemble's reflector models answers it (none: the first configured)
    guidance: str | None = None  # the instruction drawn for it (search.guidance; none: the fixed one)
    rewrite: Rewrite | None = None  # a meta-step asked with it: rewrite the worst instruction from the best


def as_case(result: ItemResult, evidence: Mapping[str, str] | None = None) -> Case:
    """The result as the reflector sees it; ``evidence`` (unit id -> its words) spells out what was missing."""
    missing = [evidence[u][:EVIDENCE_CHARS] for u in result.missing if u in evidence] if evidence else []
    return Case(
        question=result.question, expected=result.expected[:CASE_ANSWER_CHARS],
        prediction=result.prediction[:CASE_ANSWER_CHARS], score=result.score,
        query=result.query, context=result.context[:CASE_CONTEXT_CHARS], error=result.error,
        trace=result.trace[:CASE_TRACE_CHARS], stage=result.stage, missing_evidence=missing,
    )


def _weighted(failures: list[ItemResult], rng: random.Random, count: int) -> list[ItemResult]:
    """``count`` failures drawn without replacement with weight 1 - score."""
    chosen: list[ItemResult]
    pool, chosen = list(failures), []
    while pool and len(chosen) < count:
        pick = rng.choices(range(len(pool)), weights=[1.0 - r.score for r in pool], k=1)[0]
        chosen.append(pool.pop(pick))
    return chosen


def _stratified(failures: list[ItemResult], rng: random.Random) -> list[ItemResult]:
    """One case per (stage, category) class in turn, the largest classes first, drawn by weight inside each."""
    classes: dict[tuple[str, str], list[ItemResult]] = {}
    for result in failures:
        classes.setdefault((result.stage or "unattributed", result.category), []).append(result)
    order = sorted(classes, key=lambda key: (-len(classes[key]), key))
    chosen: list[ItemResult] = []
    while len(chosen) < MAX_FAILURES and any(classes[key] for key in order):
        for key in order:
            if classes[key] and len(chosen) < MAX_FAILURES:
                pick = _weighted(classes[key], rng, 1)[0]
                classes[key].remove(pick)
                chosen.append(pick)
    return chosen


def shown_results(results: list[ItemResult], hidden: Collection[str]) -> list[ItemResult]:
    """The results a reflector may see: none of the ``hidden`` questions (those that score the program)."""
    return [r for r in results if r.id not in hidden]


def sample_cases(results: list[ItemResult], rng: random.Random,
                 evidence: Mapping[str, str] | None = None, *,
                 hidden: Collection[str] = frozenset()) -> tuple[list[Case], Case | None]:
    """Up to three failures (score < 1), stratified by stage and category where they are attributed, else
    drawn with weight 1 - score; and the best success (the highest-scoring answer above 0), so the reflector
    sees what works as well. Never one of the ``hidden`` questions: the paper draws its cases from the
    rotating set, and a reflector shown the answers of the fitness questions could hard-code them."""
    results = shown_results(results, hidden)
    failures = [r for r in results if r.score < 1.0]
    attributed = any(r.stage is not None for r in failures)
    chosen = _stratified(failures, rng) if attributed else _weighted(failures, rng, MAX_FAILURES)
    successes = [r for r in results if r.score > 0.0 and r not in chosen]
    success = max(successes, key=lambda r: r.score) if successes else None
    return [as_case(r, evidence) for r in chosen], as_case(success) if success else None

