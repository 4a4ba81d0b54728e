"""The three replies an author gives for one bundle (an answer plan, a question, a blind reader's answer) and
the programmatic checks each must pass. A check returns the reason it rejects (counted by reason), or None.

The answer plan comes first (MemSteer found planning before asking the question the largest gain in
quality): the facts, each a quote from a piece of the bundle it cites, how they combine, the answer and its
type. A plan whose citations name no piece of the bundle, or whose quotes do not stand in the piece they cite,
is rejected before any question is written.
"""

from __future__ import annotations

import re
from typing import Literal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mstar_ray import text as tx
from mstar_ray.llm.structured import parse_json_object
from mstar_ray.supervise.bundles import Bundle, Piece
from mstar_ray.families.qa.scoring import normalize_answer

Operation = Literal["single", "comparison", "temporal_order", "update", "aggregation"]
AnswerType = Literal["entity", "date", "number", "yes_no", "phrase"]
# Operations that combine facts from more than one piece.
COMBINING: frozenset[str] = frozenset({"comparison", "temporal_order", "update", "aggregation"})
MAX_QUESTION_CHARS = 300
_PIECE_ID = re.compile(r"\[?\bD\d+:\d+\b\]?")


class Fact(BaseModel):
    model_config = ConfigDict(extra="ignore")

    piece: str = Field(min_length=1)
    quote: str = Field(min_length=1)


class AnswerPlan(BaseModel):
    model_config = ConfigDict(extra="ignore")

    topic: str = ""
    facts: list[Fact] = Field(min_length=1)
    operation: Operation
    answer: str = Field(min_length=1)
    answer_type: AnswerType

    @property
    def evidence(self) -> list[str]:
        return list(dict.fromkeys(fact.piece for fact in self.facts))


class BlindAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    answerable: bool
    answer: str = ""
    citations: list[str] = []


def _flat(text: str) -> str:
    return " ".join(tx.fold_quotes(text).casefold().split())


def _object(reply: str, what: str) -> tuple[dict[str, Any] | None, str | None]:
    obj, _ = parse_json_object(reply)
    return (obj, None) if obj is not None else (None, f"{what}: not JSON")


def read_plan(reply: str, bundle: Bundle) -> tuple[AnswerPlan | None, str | None]:
    obj, problem = _object(reply, "plan")
    if obj is None:
        return None, problem
    try:
        plan = AnswerPlan.model_validate(obj)
    except ValidationError as err:
        field = ".".join(str(part) for part in err.errors()[0]["loc"]) or "plan"
        return None, f"plan: malformed ({field})"
    for fact in plan.facts:
        piece = bundle.get(fact.piece)
        if piece is None:
            return None, "plan: cites a piece not in its bundle"
        if _flat(fact.quote) not in _flat(piece.text):
            return None, "plan: a quote is not in the piece it cites"
    if plan.operation in COMBINING and len(plan.evidence) < 2:
        return None, "plan: combines facts from one piece only"
    if plan.operation == "single" and plan.answer_type != "yes_no" and not _answer_stands_in(plan, bundle):
        return None, "plan: its answer is in none of its facts"
    return plan, None


def _answer_stands_in(plan: AnswerPlan, bundle: Bundle) -> bool:
    """A single fact's answer must come from the fact: its quote, or the date of the piece it cites."""
    answer = normalize_answer(plan.answer)
    for fact in plan.facts:
        piece: Piece | None = bundle.get(fact.piece)
        sources = [fact.quote] + ([piece.date] if piece is not None and plan.answer_type == "date" else [])
        if any(answer and answer in normalize_answer(source) for source in sources):
            return True
    return False


def read_question(reply: str, plan: AnswerPlan) -> tuple[str | None, str | None]:
    obj, problem = _object(reply, "question")
    if obj is None:
        return None, problem
    question = str(obj.get("question", "")).strip()
    if not question:
        return None, "question: empty"
    if len(question) > MAX_QUESTION_CHARS or not question.endswith("?"):
        return None, "question: not one short question"
    if _PIECE_ID.search(question):
        return None, "question: names a piece id"
    answer = normalize_answer(plan.answer)
    if plan.answer_type != "yes_no" and answer and f" {answer} " in f" {normalize_answer(question)} ":
        return None, "question: gives its answer away"
    return question, None


def read_verdict(reply: str, plan: AnswerPlan) -> str | None:
    """None when the blind reader found the question answerable, reached the plan's answer and cited every
    evidence piece; otherwise why not."""
    obj, problem = _object(reply, "verification")
    if obj is None:
        return problem
    try:
        verdict = BlindAnswer.model_validate(obj)
    except ValidationError:
        return "verification: malformed"
    if not verdict.answerable:
        return "verification: not answerable from its evidence"
    if normalize_answer(verdict.answer) != normalize_answer(plan.answer):
        return "verification: a different answer"
    if not set(plan.evidence) <= set(verdict.citations):
        return "verification: does not cite all its evidence"
    return None
