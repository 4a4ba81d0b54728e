"""The messages between the driver and its actors: small, self-contained, and free of any Ray type, so
workers need no data files (texts and items travel with the job) and hold no state of their own."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, model_validator

from mstar_ray.contract import inspect_program
from mstar_ray.llm.usage import CallLog
from mstar_ray.results import EvalReport
from mstar_ray.search.split import SplitPlan
from mstar_ray.tasks.adapter import FamilyRef, registered
from mstar_ray.tasks.model import Item, RawText, Task


Purpose = Literal["screen", "search", "confirm", "test"]  # screen: the cascade's first stage


class EvalJob(BaseModel):
    candidate_id: str
    source: str
    purpose: Purpose
    task_name: str
    family: str = "qa"  # how the items are run and scored (mstar_ray.families)
    texts: list[RawText]
    items: list[Item]
    static_ids: list[str]  # the items whose mean score is the fitness
    judge: bool = False
    # Answered first and followed by kb.feedback(query, score), for programs that define it; never static ids.
    feedback_ids: list[str] = []
    attribute: bool = False  # attribute each failure with evidence to storage, retrieval or answering
    # A family of a user's task adapter: how the worker makes it. Filled in from the registry of the process
    # that makes the job (the driver, which loaded the adapter), so that no caller has to know about it.
    family_ref: FamilyRef | None = None

    @model_validator(mode="after")
    def _ship_users_family(self) -> EvalJob:
        if self.family_ref is None:
            self.family_ref = registered(self.family)
        return self

    @model_validator(mode="after")
    def _feedback_never_scored(self) -> EvalJob:
        scored = set(self.feedback_ids) & set(self.static_ids)
        if scored:
            raise ValueError(f"feedback on items whose scores are reported: {sorted(scored)[:5]}")
        return self

    @property
    def key(self) -> str:
        """Names the job on the progress board: one candidate may be evaluated for several purposes."""
        return f"{self.purpose}:{self.candidate_id}"


class EvalOutcome(BaseModel):
    candidate_id: str
    purpose: Purpose
    report: EvalReport
    static_score: float
    node_id: str
    worker_pid: int
    calls: list[CallLog] = []  # every LLM request of this evaluation, for the llm_calls log


class EvalJobs:
    """The jobs of one run's evaluations: for each purpose, which texts it writes, which items it asks, which of
    them score it and which are feedback. One place for the search's evaluations and those after it."""

    def __init__(self, task: Task, plan: SplitPlan, *, judge_all: bool, attribute: bool) -> None:
        self.task = task
        self.plan = plan
        self.judge_all = judge_all  # the judge model on every evaluation (``search.judge_on: all``)
        self.attribute = attribute
        self.texts = {t.id: t for t in task.texts}
        self.items = {q.id: q for q in task.items}

    def questions(self, iteration: int) -> list[str]:
        """A search evaluation's questions in the order the program reads them: the iteration's rotating questions,
        then the static set. Whatever the program returns on a rotating question (its answer, context, error) is
        what a reflector may be shown; read first, it was written before the program saw any question that scores
        it, so it cannot carry one."""
        static = self.plan.split.static
        return [q for q in dict.fromkeys(self.plan.rotating(iteration)) if q not in static] + list(static)

    def search(self, candidate_id: str, source: str, iteration: int) -> EvalJob:
        # The rotating questions are the feedback slice of a program that learns from feedback (MemRL): they are
        # training questions, answered before the static ones whose mean is the fitness.
        questions = self.questions(iteration)
        static = self.plan.split.static
        return self._job(candidate_id, source, "search", [self.texts[t] for t in self.plan.written(questions)],
                         questions, static, judge=self.judge_all, feedback=[q for q in questions if q not in static],
                         attribute=self.attribute)

    def screen(self, candidate_id: str, source: str) -> EvalJob:
        """The cascade's first stage: the slice of the static set, with its own texts written, and no feedback
        slice (every program is screened alike, so slice scores compare)."""
        split = self.plan.split
        return self._job(candidate_id, source, "screen", [self.texts[t] for t in split.screen_texts], split.screen,
                         split.screen, judge=self.judge_all)

    def after_search(self, candidate_id: str, source: str, purpose: Purpose, question_ids: list[str],
                     text_ids: list[str]) -> EvalJob:
        """A confirmation or a test. A program that learns from feedback gets it on the static questions first, as
        in the search it got it on rotating questions before the static ones (with their evidence written too)."""
        feedback = list(self.plan.split.static) if inspect_program(source).has_feedback else []
        wanted = {*text_ids, *self.plan.evidence_texts(feedback)}
        return self._job(candidate_id, source, purpose, [t for t_id, t in self.texts.items() if t_id in wanted],
                         question_ids + feedback, question_ids, judge=purpose == "test", feedback=feedback)

    def _job(self, candidate_id: str, source: str, purpose: Purpose, texts: list[RawText], question_ids: list[str],
             static_ids: list[str], *, judge: bool, feedback: list[str] | None = None,
             attribute: bool = False) -> EvalJob:
        return EvalJob(candidate_id=candidate_id, source=source, purpose=purpose, task_name=self.task.name,
                       family=self.task.family, texts=texts, items=[self.items[q] for q in question_ids],
                       static_ids=static_ids, judge=judge, feedback_ids=feedback or [], attribute=attribute)


def static_score(report: EvalReport, static_ids: list[str]) -> float:
    """Mean score over the static items; a runtime violation has already zeroed every score."""
    wanted = set(static_ids)
    scores = [r.score for r in report.results if r.id in wanted]
    return sum(scores) / len(scores) if scores else 0.0
