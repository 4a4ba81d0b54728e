"""The supervision pipeline over one history: bundles -> answer plan (checked) -> question (checked) -> blind
reading (checked) -> a question item with its evidence; every rejection counted by reason; a seeded share of
the kept questions marked for training (failure cases only), the rest for validation (the fitness)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Protocol

from pydantic import BaseModel

from mstar_ray.supervise.bundles import Bundle, Piece, bundles, pieces
from mstar_ray.supervise.plan import AnswerPlan, read_plan, read_question, read_verdict
from mstar_ray.tasks.model import Item, RawText
from mstar_ray.families.qa.scoring import normalize_answer


class Author(Protocol):
    name: str  # what wrote the supervision: a model, or the offline templates (labelled so)

    def plan(self, bundle: Bundle) -> str: ...

    def question(self, plan: AnswerPlan, bundle: Bundle) -> str: ...

    def verify(self, question: str, answer_type: str, cited: list[Piece]) -> str: ...


class SupervisionReport(BaseModel):
    author: str
    texts: int
    pieces: int
    bundles: int
    plans_checked: int  # plans that passed the programmatic check
    questions_checked: int
    kept: int  # questions the blind reader recovered
    rejected: dict[str, int]  # by reason, in the order of the steps
    train: int
    validation: int
    by_category: dict[str, int]


def _category(plan: AnswerPlan) -> str:
    return f"{plan.operation}:{plan.answer_type}"


def _mark_training(items: list[Item], share: float, seed: int) -> dict[str, str]:
    """A seeded ``share`` of each category marked ``train``; a category of two or more keeps one for validation."""
    rng = random.Random(f"supervise-train:{seed}")
    marks: dict[str, str] = {}
    by_category: dict[str, list[str]] = {}
    for item in items:
        by_category.setdefault(item.category, []).append(item.id)
    for ids in by_category.values():
        ids = sorted(ids)
        rng.shuffle(ids)
        count = min(round(share * len(ids)), len(ids) - 1) if len(ids) >= 2 else 0
        marks.update({item_id: "train" for item_id in ids[:count]})
    return marks


class Attempt(BaseModel):
    """What became of one bundle: the author's replies (cut) and the reason it was dropped, if it was."""

    pieces: list[str]
    plan: str
    question: str = ""
    verification: str = ""
    rejected: str | None = None
    item: str | None = None  # the id of the question it gave


REPLY_CHARS = 2000


def supervise(texts: list[RawText], author: Author, *, count: int, seed: int = 0, train_share: float = 0.5,
              ) -> tuple[list[Item], dict[str, str], SupervisionReport, list[Attempt]]:
    """Questions with evidence from ``texts`` alone: (items, split marks, the report, every bundle's attempt)."""
    made = bundles(texts, count, seed)
    attempts: list[Attempt] = []
    items: list[Item] = []
    seen: set[str] = set()
    for bundle in made:
        attempt = Attempt(pieces=[p.id for p in bundle.pieces], plan=author.plan(bundle)[:REPLY_CHARS])
        attempts.append(attempt)
        plan, attempt.rejected = read_plan(attempt.plan, bundle)
        if plan is None:
            continue
        attempt.question = author.question(plan, bundle)[:REPLY_CHARS]
        question, attempt.rejected = read_question(attempt.question, plan)
        if question is None:
            continue
        cited = [p for piece in plan.evidence if (p := bundle.get(piece)) is not None]  # read_plan found each
        attempt.verification = author.verify(question, plan.answer_type, cited)[:REPLY_CHARS]
        attempt.rejected = read_verdict(attempt.verification, plan)
        if attempt.rejected is None and normalize_answer(question) in seen:
            attempt.rejected = "a question already kept"
        if attempt.rejected is not None:
            continue
        seen.add(normalize_answer(question))
        attempt.item = f"gen-{seed}/q{len(items)}"
        items.append(Item(id=attempt.item, question=question, answer=plan.answer.strip(),
                          category=_category(plan), evidence=plan.evidence))
    marks = _mark_training(items, train_share, seed)
    rejected = Counter(a.rejected for a in attempts if a.rejected is not None)
    report = SupervisionReport(
        author=author.name, texts=len(texts), pieces=len(pieces(texts)), bundles=len(made),
        plans_checked=sum(not (a.rejected or "").startswith("plan:") for a in attempts),
        questions_checked=sum(a.verification != "" for a in attempts), kept=len(items),
        rejected=dict(sorted(rejected.items())),
        train=sum(m == "train" for m in marks.values()), validation=len(items) - len(marks),
        by_category=dict(sorted(Counter(item.category for item in items).items())))
    return items, marks, report, attempts
