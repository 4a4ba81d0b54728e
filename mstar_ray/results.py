"""What one evaluation of a program produces: a result per item, the report, and its progress as it runs.

Shared by the evaluation (``mstar_ray.agent.evaluation``), the search (``mstar_ray.search``) and the
reflector (``mstar_ray.reflect``), so it imports only what the records are made of.
"""

from __future__ import annotations

import collections

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mstar_ray.llm.usage import StepUsage
from mstar_ray.tasks.model import Item


class ItemResult(BaseModel):
    """How one item went, whatever its family: what was asked and expected, what the agent produced, its
    score in [0, 1], what memory was asked and returned, and the trace a reflector reads to see why."""

    id: str
    category: str
    question: str
    expected: str
    prediction: str = ""
    score: float = 0.0
    judge: float | None = None  # 1 correct, 0 wrong, None not judged (no judge, or an unreadable verdict)
    query: dict[str, Any] | None = None
    context: str = ""
    error: str | None = None
    seconds: float = 0.0
    trace: str = ""  # what happened beyond the answer: an episode's steps, the rubric's verdicts
    # Where the memory failed, for a failed item with evidence (mstar_ray.agent.attribution): answering,
    # retrieval, storage or not_written; and the evidence units missing from the context.
    stage: str | None = None
    missing: list[str] = []

    @classmethod
    def of(cls, item: Item, **fields: Any) -> ItemResult:
        return cls(id=item.id, category=item.category, question=item.question, expected=item.answer, **fields)


class CategoryScore(BaseModel):
    n: int
    score: float


class RuntimeViolation(BaseModel):
    phase: str  # load | write | read | feedback
    kind: str
    message: str
    traceback: str = ""


class SandboxInfo(BaseModel):
    layers: list[str]
    missing_layers: dict[str, str]
    ready_seconds: float | None
    # How reads ran: "forked" (each in a reader from the post-write state), else why in the program's process.
    reads: str | None = None
    readers_forked: int = 0
    readers_peak: int = 0
    rss_peak_kb: int = 0  # the program's process and its readers, at the fork that saw the most


class EvalReport(BaseModel):
    task: str
    family: str = "qa"
    metric: str = "token F1"  # what the scores are (the family's metric)
    backend: str
    embedder: str
    texts_written: int
    score: float
    categories: dict[str, CategoryScore]
    results: list[ItemResult]
    violation: RuntimeViolation | None = None
    write_example: dict[str, Any] | None = None  # the first stored item and its raw text, for reflection
    write_errors: int = 0
    write_error_examples: list[str] = []
    judge_score: float | None = None  # mean verdict over the judged questions
    judged: int = 0
    calls: dict[str, int]
    llm: dict[str, StepUsage] = {}  # per step: requests, cache hits, retries, tokens (real-LLM backends)
    embedding: StepUsage | None = None  # texts embedded and cache hits (cached embedders)
    wall_seconds: float
    sandbox: SandboxInfo
    stages: dict[str, dict[str, int]] | None = None  # attributed failures by category and stage, if attributed
    attribution_stopped: str | None = None  # why attribution stopped early (a violation in an oracle read)

    def without(self, ids: Collection[str]) -> EvalReport:
        """The report without the results of ``ids`` (a feedback slice that is not to be logged)."""
        kept = [r for r in self.results if r.id not in set(ids)]
        score, categories = summarise(kept)
        stages = stage_counts(kept) if self.stages is not None else None
        return self.model_copy(update={"results": kept, "score": score, "categories": categories, "stages": stages})


@dataclass
class EvalProgress:
    """How far one evaluation has got, updated in place as it runs (a dataclass: it changes at every
    write and every question, so it must cost next to nothing)."""

    texts_total: int
    items_total: int
    texts_done: int = 0
    items_done: int = 0
    write_s: float = 0.0  # time spent writing so far
    read_s: float = 0.0  # time spent reading and answering so far
    finished: bool = False

    def eta_s(self) -> float | None:
        """Seconds left at the rates seen so far (a question is assumed to cost what a write costs until
        one has been answered); None before anything was timed."""
        if self.finished:
            return 0.0
        per_text = self.write_s / self.texts_done if self.texts_done else None
        per_question = self.read_s / self.items_done if self.items_done else per_text
        if per_question is None:
            return None
        left = (self.texts_total - self.texts_done) * (per_text or per_question)
        return left + (self.items_total - self.items_done) * per_question


ProgressHook = Callable[[EvalProgress], None]


def summarise(results: list[ItemResult]) -> tuple[float, dict[str, CategoryScore]]:
    by_category: dict[str, list[float]] = {}
    for result in results:
        by_category.setdefault(result.category, []).append(result.score)
    categories = {name: CategoryScore(n=len(s), score=sum(s) / len(s)) for name, s in sorted(by_category.items())}
    overall = sum(r.score for r in results) / len(results) if results else 0.0
    return overall, categories


def stage_counts(results: list[ItemResult]) -> dict[str, dict[str, int]]:
    """Attributed failures (``mstar_ray.agent.attribution``) by category, then stage."""
    counts: dict[str, collections.Counter[str]] = {}
    for result in results:
        if result.stage is not None:
            counts.setdefault(result.category, collections.Counter())[result.stage] += 1
    return {category: dict(sorted(c.items())) for category, c in sorted(counts.items())}


def stage_totals(results: list[ItemResult]) -> dict[str, int]:
    """Attributed failures by stage."""
    return dict(sorted(collections.Counter(r.stage for r in results if r.stage is not None).items()))


MAX_IN_FLIGHT = 256
UNLIMITED_IN_FLIGHT = 64  # the M* reference's pool: what one evaluation keeps in flight against an endpoint with no limit


class EvalConcurrency(BaseModel):
    """The ``evaluation`` section of a run config: how many steps of one evaluation overlap
    (``mstar_ray.agent.concurrency``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    in_flight: int = Field(16, ge=1, le=MAX_IN_FLIGHT, description="steps of one evaluation that wait on a model at once "
                           "(extractions, queries, items); each endpoint's max_concurrency bounds the requests "
                           "themselves, across the run. Unset: what the task endpoint admits, at least 16. 1: the "
                           "serial protocol")
    episodes: int = Field(4, ge=1, le=64, description="episodes of one evaluation played at once, each in its own "
                          "environment process (which costs memory: a JVM for TextWorldExpress)")
    readers: int = Field(16, ge=1, le=64, description="reads of one evaluation served at once, each by a reader the "
                         "program's process forks from its state after the writes (each read sees exactly that "
                         "state, Chroma's collections included; a reader costs the memory its reads touch). 1, or "
                         "a program whose process runs threads: reads run in the program's own process, in item "
                         "order")
    queries_ahead: bool = Field(True, description="build the items' queries while the writes run, in the slots the "
                                "extractions leave free. Unset: where the task endpoint admits in_flight requests at "
                                "once; a server with fewer slots is the bottleneck whatever the order, so building "
                                "ahead cannot gain there")

    def for_endpoint(self, limit: int | None) -> EvalConcurrency:
        """``in_flight`` for a task endpoint that admits ``limit`` requests at once (None: no limit), where the
        config does not set it: what the endpoint admits, never below the default (a gateway slot is waited for
        either way) and at most the field's bound; ``UNLIMITED_IN_FLIGHT`` for an endpoint with no limit. And
        ``queries_ahead``, where the config does not set it: only if the endpoint admits that many at once."""
        update: dict[str, Any] = {}
        if "in_flight" not in self.model_fields_set:
            update["in_flight"] = UNLIMITED_IN_FLIGHT if limit is None else min(MAX_IN_FLIGHT, max(self.in_flight, limit))
        if "queries_ahead" not in self.model_fields_set:
            update["queries_ahead"] = limit is None or limit >= update.get("in_flight", self.in_flight)
        return self.model_copy(update=update)


# The offline task agent's evaluation: nothing waits on a model, so overlapping steps buys nothing; and reads stay in
# the program's process, since a reader per read costs several times the evaluation offline (measured on rulemem,
# docs/results.md) while every one of the 33 programs we hold scores the same either way (docs/concepts/contract.md).
SERIAL = EvalConcurrency(in_flight=1, episodes=1, readers=1)
