"""What a task is: raw experience texts to write into memory, and questions with exact answers."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RawText(BaseModel):
    """One unit of raw experience, written into memory by one ``kb.write`` call.

    ``text`` is exactly what the task agent sees (already carrying its speaker and date).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    text: str


class Question(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    answer: str
    category: str
    evidence: list[str] = []


class Task(BaseModel):
    """One benchmark instance: the memory is built from ``texts``, then ``questions`` are asked."""

    model_config = ConfigDict(frozen=True)

    name: str
    texts: list[RawText]
    questions: list[Question]
    metric: str = "token_f1"
