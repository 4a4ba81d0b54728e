"""What a task is: raw experience texts to write into memory, and the items an agent is evaluated on.

Every task family (``mstar_ray.families``) uses these records: a question with a short answer, an episode to
play, a conversation to answer under a rubric are all an :class:`Item`, whose ``spec`` carries what only its
family reads (the game to start, the rubric's criteria). The search sees items, categories and scores only.

Evidence is kept at the finest level the data gives (a LoCoMo dialogue turn), whatever the texts are cut
into (a session per text, as the paper does, or a turn per text): each text lists the evidence units it
holds, with their place in it, so ``Task.evidence()`` answers "which text holds evidence X, and what does
X itself say" for any task family. A text that lists no units is one unit, named by its own id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

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


class Item(BaseModel):
    """One thing the agent is evaluated on.

    ``question`` is what is put to the agent and what memory is asked from (a question; an episode's goal and
    first observation; a conversation's last message): the split clusters items by its embedding. ``answer``
    is the reference, shown to the reflector beside the agent's output (a gold answer; an ideal response;
    for an episode, what success looks like).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    answer: str
    category: str
    evidence: list[str] = []  # evidence unit ids
    spec: dict[str, Any] = {}  # what the item's family needs to run it (JSON: it travels in the job)


def limit_items(items: Sequence[Item], limit: int | None) -> list[Item]:
    """Keep at most ``limit`` items, taken round-robin across categories, in their original order.

    Round-robin so that a small limit (say 8 for a quick smoke run) still exercises every category instead of
    only the first one in the file; the result of ``limit=n`` is always a subset of ``limit=n+1``.
    """
    if limit is None:
        return list(items)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    queues: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        queues.setdefault(item.category, []).append(index)
    chosen: list[int] = []
    depth = 0
    while len(chosen) < limit and any(depth < len(queue) for queue in queues.values()):
        for queue in queues.values():
            if depth < len(queue) and len(chosen) < limit:
                chosen.append(queue[depth])
        depth += 1
    return [items[index] for index in sorted(chosen)]


class Evidence(NamedTuple):
    text_id: str  # the raw text that holds the unit
    text: str  # the unit's own text, as it stands in that raw text


class Task(BaseModel):
    """One benchmark instance: the memory is built from ``texts``, then ``items`` are run by the task's family.

    ``test_ids`` are items the task itself holds out for the final test (unseen games, a benchmark's own test
    split); without them the search holds out a share of every category. ``train_ids`` are items only for the
    reflector's failure cases (the rotating set), never for the fitness: MemSteer's training questions, where the
    others are its validation questions.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    texts: list[RawText]
    items: list[Item]
    family: str = "qa"  # mstar_ray.families: how an item is run and scored
    test_ids: list[str] = []
    train_ids: list[str] = []

    @model_validator(mode="after")
    def _marks_known(self) -> Task:
        ids = {item.id for item in self.items}
        for name, marked in (("test_ids", self.test_ids), ("train_ids", self.train_ids)):
            if set(marked) - ids:
                raise ValueError(f"task {self.name}: {name} name items it does not have: {sorted(set(marked) - ids)[:5]}")
        if set(self.test_ids) & set(self.train_ids):
            raise ValueError(f"task {self.name}: items both held out and for training: "
                             f"{sorted(set(self.test_ids) & set(self.train_ids))[:5]}")
        return self

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
