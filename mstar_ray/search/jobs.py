"""The messages between the driver and its actors: small, self-contained, and free of any Ray type, so
workers need no data files (texts and items travel with the job) and hold no state of their own."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, model_validator

from mstar_ray.llm.usage import CallLog
from mstar_ray.results import EvalReport
from mstar_ray.tasks.adapter import FamilyRef, registered
from mstar_ray.tasks.model import Item, RawText


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


def static_score(report: EvalReport, static_ids: list[str]) -> float:
    """Mean score over the static items; a runtime violation has already zeroed every score."""
    wanted = set(static_ids)
    scores = [r.score for r in report.results if r.id in wanted]
    return sum(scores) / len(scores) if scores else 0.0
