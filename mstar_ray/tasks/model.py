"""What a task is: raw experience texts to write into memory, and questions with exact answers.

Evidence is kept at the finest level the data gives (a LoCoMo dialogue turn), whatever the texts are cut
into (a session per text, as the paper does, or a turn per text): each text lists the evidence units it
holds, with their place in it, so ``Task.evidence()`` answers "which text holds evidence X, and what does
X itself say" for any task family. A text that lists no units is one unit, named by its own id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, model_validator


class EvidenceUnit(BaseModel):
    """The finest piece of a raw text a question can cite (a dialogue turn): ``text[start:end]`` of its text."""

    model_config = ConfigDict(frozen=True)

    id: str
    start: int
    end: int


class RawText(BaseModel):
    """One unit of raw experience, written into memory by one ``kb.write`` call.

    ``text`` is exactly what the task agent sees (already carrying its speaker and date).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    units: list[EvidenceUnit] = []

    @model_validator(mode="after")
    def _units_inside(self) -> RawText:
        for unit in self.units:
            if not 0 <= unit.start < unit.end <= len(self.text):
                raise ValueError(f"text {self.id}: evidence unit {unit.id} spans {unit.start}..{unit.end}, "
                                 f"outside the text's {len(self.text)} characters")
        return self


class Question(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    answer: str
    category: str
    evidence: list[str] = []  # evidence unit ids


def limit_questions(questions: Sequence[Question], limit: int | None) -> list[Question]:
    """Keep at most ``limit`` questions, taken round-robin across categories, in their original order.

    Round-robin so that a small limit (say 8 for a quick smoke run) still exercises every category instead of
    only the first one in the file; the result of ``limit=n`` is always a subset of ``limit=n+1``.
    """
    if limit is None:
        return list(questions)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    queues: dict[str, list[int]] = {}
    for index, question in enumerate(questions):
        queues.setdefault(question.category, []).append(index)
    chosen: list[int] = []
    depth = 0
    while len(chosen) < limit and any(depth < len(queue) for queue in queues.values()):
        for queue in queues.values():
            if depth < len(queue) and len(chosen) < limit:
                chosen.append(queue[depth])
        depth += 1
    return [questions[index] for index in sorted(chosen)]


class Evidence(NamedTuple):
    text_id: str  # the raw text that holds the unit
    text: str  # the unit's own text, as it stands in that raw text


class Task(BaseModel):
    """One benchmark instance: the memory is built from ``texts``, then ``questions`` are asked."""

    model_config = ConfigDict(frozen=True)

    name: str
    texts: list[RawText]
    questions: list[Question]
    metric: str = "token_f1"

    def evidence(self) -> dict[str, Evidence]:
        """Every evidence unit by id: the text holding it and its own text."""
        found: dict[str, Evidence] = {}
        for raw in self.texts:
            if not raw.units:
                found[raw.id] = Evidence(raw.id, raw.text)
            for unit in raw.units:
                found[unit.id] = Evidence(raw.id, raw.text[unit.start:unit.end])
        return found

    def evidence_holders(self) -> dict[str, str]:
        """Evidence unit id -> id of the text that holds it."""
        return {unit: found.text_id for unit, found in self.evidence().items()}
