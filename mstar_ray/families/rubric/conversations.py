"""Rubric-graded conversations (HealthBench, PRBench) as tasks: what one conversation is, how it is scored, and
how a file of them becomes training texts and evaluation items.

A record is a conversation ending in a user message, a rubric (criteria with points; negative points for what a
response must avoid) and, where the benchmark gives one, a reference response. The loaders
(``mstar_ray.families.rubric.healthbench``, ``mstar_ray.families.rubric.prbench``) read their formats into records; this module
turns records into a :class:`Task` of the ``rubric`` family (``mstar_ray.families.rubric``):

- **Training texts**: a seeded share (``train_share``) of the records that may train, drawn per category, each
  written into memory as the conversation followed by its reference response. A HealthBench record may train when
  it has an ideal completion; PRBench gives no reference responses, so every PRBench record may train, with what
  its expert rubric asks of a response in place of one. Those records are never evaluated: their reference is in
  memory.
- **Evaluation items**: every other record. ``Item.question`` is the text memory is asked from (the end of the
  conversation, :data:`RECALL_CHARS`), ``Item.answer`` the reference the reflector is shown, ``Item.spec`` the
  whole conversation and its rubric (:class:`RubricSpec`).

The score is HealthBench's: the points of the criteria met over the total of the positive points, clipped to
[0, 1] per item (:func:`rubric_score`). HealthBench's own report clips the mean over items instead; an item's
score here must lie in [0, 1], as every family's does, and the unclipped figure is kept in its trace.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mstar_ray.exit_codes import InputError, MissingInput
from mstar_ray.tasks.model import Item, RawText, Task, limit_items

FAMILY = "rubric"
Role = Literal["system", "user", "assistant"]
# What memory is asked from: the conversation's end (the last user message, and what came before it as far as
# this allows). A conversation's opening is rarely what a memory should match on, and a bounded query text keeps
# every query step (and the split's clustering of items) within a small model's prompt.
RECALL_CHARS = 2000
TRAINING_HEADER = "Conversation:"
REFERENCE_HEADER = "Ideal response:"
RUBRIC_HEADER = "What the expert rubric asks of the response:"


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    role: Role
    content: str


class Criterion(BaseModel):
    """One rubric criterion: met or not, worth ``points`` when met (negative: something to avoid)."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(min_length=1)
    points: float
    tags: list[str] = []

    @field_validator("points", mode="before")
    @classmethod
    def _a_number(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("points must be a number, not a boolean")
        return value


class RubricSpec(BaseModel):
    """What the ``rubric`` family reads from ``Item.spec``: the conversation to answer and its rubric."""

    model_config = ConfigDict(frozen=True)

    messages: list[Message]
    criteria: list[Criterion]


class RubricRecord(NamedTuple):
    """One conversation as a loader read it."""

    id: str
    category: str
    messages: list[Message]
    criteria: list[Criterion]
    reference: str | None  # the reference response, if the benchmark gives one
    trainable: bool  # may be written into memory (with its reference, or else its rubric's account)


def check_rubric(criteria: Sequence[Criterion], where: str, field: str) -> None:
    """A rubric must be able to score: some criterion has positive points (the score divides by their total)."""
    if not criteria:
        raise InputError(f"{where}: field {field!r}: the rubric has no criteria")
    if not any(c.points > 0 for c in criteria):
        points = ", ".join(f"{c.points:g}" for c in criteria)
        raise InputError(f"{where}: field {field!r}: no criterion has positive points ({points}); the score is the "
                         "points met over the total of the positive points, so this rubric cannot score a response")


def check_conversation(messages: Sequence[Message], where: str, field: str) -> None:
    if not messages:
        raise InputError(f"{where}: field {field!r}: the conversation has no messages")
    if messages[-1].role != "user":
        raise InputError(f"{where}: field {field!r}: the conversation's last message is the {messages[-1].role}'s; "
                         "it must end with the user message to respond to")
    empty = next((i for i, m in enumerate(messages) if not m.content.strip()), None)
    if empty is not None:
        raise InputError(f"{where}: field '{field}.{empty}.content': the message is empty")


# ---------------------------------------------------------------------------------------------------------
# Texts


def bounded_messages(messages: Sequence[Message], max_chars: int) -> list[Message]:
    """The conversation's end within ``max_chars`` of content: the latest messages that fit whole, and the last
    message always (its end kept when it alone is too long)."""
    kept: list[Message] = []
    used = 0
    for message in reversed(messages):
        if kept and used + len(message.content) > max_chars:
            break
        content = message.content if len(message.content) <= max_chars else "..." + message.content[-max_chars:]
        kept.append(Message(role=message.role, content=content))
        used += len(content)
    return kept[::-1]


def conversation_text(messages: Sequence[Message], max_chars: int | None = None) -> str:
    """The conversation as ``Role: content`` lines (a lone user message as itself), its end within ``max_chars``."""
    shown = list(messages) if max_chars is None else bounded_messages(messages, max_chars)
    if len(shown) == 1 and shown[0].role == "user":
        return shown[0].content
    return "\n".join(f"{m.role.capitalize()}: {m.content}" for m in shown)


def rubric_account(criteria: Sequence[Criterion]) -> str:
    """What the rubric asks of a response, for people (and memory, where no reference response is given)."""
    wanted = [f"- {c.text}" for c in criteria if c.points > 0]
    avoided = [f"- {c.text}" for c in criteria if c.points < 0]
    parts = ["A good response:", *wanted]
    if avoided:
        parts += ["It must not:", *avoided]
    return "\n".join(parts)


def training_text(record: RubricRecord) -> str:
    """A past conversation with its reference response (or, without one, its rubric's account), as it is written
    into memory."""
    after = (f"{REFERENCE_HEADER}\n{record.reference}" if record.reference
             else f"{RUBRIC_HEADER}\n{rubric_account(record.criteria)}")
    return f"{TRAINING_HEADER}\n{conversation_text(record.messages)}\n{after}"


# ---------------------------------------------------------------------------------------------------------
# Scoring


class RubricScore(NamedTuple):
    score: float  # in [0, 1]
    raw: float | None  # before clipping; None when no positive criterion was judged
    earned: float  # points of the criteria met (negative ones subtract)
    possible: float  # the total of the positive points judged


def rubric_score(points: Sequence[float], met: Sequence[bool | None]) -> RubricScore:
    """HealthBench's score: points of the met criteria over the total positive points, clipped to [0, 1].

    ``None`` in ``met`` is a criterion whose verdict could not be read: it is left out of both sums rather than
    guessed either way. With no positive criterion judged there is nothing to divide by: the score is 0 and
    ``raw`` is None, which the caller reports as such.
    """
    if len(points) != len(met):
        raise ValueError(f"{len(points)} criteria but {len(met)} verdicts")
    judged = [(p, m) for p, m in zip(points, met) if m is not None]
    possible = sum(p for p, _ in judged if p > 0)
    earned = sum(p for p, m in judged if m)
    if possible <= 0:
        return RubricScore(0.0, None, earned, possible)
    raw = earned / possible
    return RubricScore(min(max(raw, 0.0), 1.0), raw, earned, possible)


# ---------------------------------------------------------------------------------------------------------
# Records -> task


def training_ids(records: Sequence[RubricRecord], share: float, seed: int) -> set[str]:
    """The records written into memory: per category, ``round(share x n)`` of its n records that may train, drawn by a generator seeded from (seed, category), so a record's role depends on neither the file's order
    nor the other categories."""
    by_category: dict[str, list[str]] = {}
    for record in records:
        if record.trainable:
            by_category.setdefault(record.category, []).append(record.id)
    chosen: set[str] = set()
    for category, ids in sorted(by_category.items()):
        ids.sort()
        random.Random(f"{seed}:{category}").shuffle(ids)
        chosen.update(ids[: round(share * len(ids))])
    return chosen


def rubric_task(name: str, records: Sequence[RubricRecord], *, where: str, train_share: float, seed: int,
                limit: int | None = None, only_categories: Sequence[str] | None = None) -> Task:
    """The task of ``records`` (already checked by their loader): training texts and evaluation items as the
    module docstring says; ``only_categories`` keeps those categories before anything is drawn."""
    seen: dict[str, int] = {}
    for number, record in enumerate(records):
        if record.id in seen:
            raise InputError(f"{where}: records {seen[record.id] + 1} and {number + 1} have the same id {record.id!r}")
        seen[record.id] = number
    if only_categories:
        present = sorted({r.category for r in records})
        unknown = sorted(set(only_categories) - set(present))
        if unknown:
            raise InputError(f"{where}: no item of categor{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}; "
                             f"the file's categories are {', '.join(present)}")
        records = [r for r in records if r.category in set(only_categories)]
    train = training_ids(records, train_share, seed)
    texts = [RawText(id=f"train/{r.id}", text=training_text(r)) for r in records if r.id in train]
    items = [
        Item(id=r.id, question=conversation_text(r.messages, RECALL_CHARS), category=r.category,
             answer=r.reference or rubric_account(r.criteria),
             spec=RubricSpec(messages=r.messages, criteria=r.criteria).model_dump())
        for r in records if r.id not in train
    ]
    if not items:
        raise InputError(f"{where}: every record became a training text (train_share {train_share}); none is left "
                         "to evaluate")
    return Task(name=name, family=FAMILY, texts=texts, items=limit_items(items, limit))


def rubric_file_task(benchmark: str, title: str, data: str | Path | None, read: Callable[[Path], list[RubricRecord]],
                     *, kind: str, how_to_get: str, train_share: float, seed: int, limit: int | None,
                     only_categories: Sequence[str] | None) -> Task:
    """The task ``<benchmark>/<file stem>`` of a benchmark file the user supplies (``read`` parses and checks
    it); ``kind`` says what file it takes, ``how_to_get`` where to get one: we never ship these benchmarks."""
    if data is None:
        raise InputError(f"the {benchmark} task needs its {kind}: --data FILE (task.data); {title} is not shipped")
    path = Path(data).expanduser()
    if not path.is_file():
        raise MissingInput(f"{title} file not found: {path}. {title} is not shipped with mstar-ray: {how_to_get} "
                           "and point --data (task.data) at it")
    records = read(path)
    if not records:
        raise InputError(f"{path}: no records")
    return rubric_task(f"{benchmark}/{path.stem}", records, where=str(path), train_share=train_share, seed=seed,
                       limit=limit, only_categories=only_categories)
