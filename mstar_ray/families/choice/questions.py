"""Multiple-choice questions from a user's own data, for the ``choice`` family (``mstar_ray.families.choice``): a
directory with ``texts.jsonl``, the texts written into memory as the ``jsonl`` task reads them, and
``questions.jsonl``, one question per line with its options and the right one::

    {"id": "q1", "question": "Which city did Ann move to?", "options": ["Porto", "Lisbon", "Faro"],
     "answer": "Lisbon", "category": "places", "evidence": ["t1"], "split": "test"}

``evidence`` and ``split`` are optional and mean what they mean for the ``jsonl`` task. Every problem is
reported with the file, the line and the field, and nothing is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mstar_ray.exit_codes import InputError, MissingInput
from mstar_ray.families.qa.jsonl import QUESTIONS_FILE, TEXTS_FILE, load_texts
from mstar_ray.tasks.model import Item, Task, limit_items
from mstar_ray.tasks.records import parse_record, read_json_lines

if TYPE_CHECKING:
    from mstar_ray.families.task_options import ChoiceOptions

FAMILY = "choice"


class _Question(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=2)
    answer: str
    category: str = Field(min_length=1)
    evidence: list[str] = []
    split: Literal["test", "train"] | None = None

    @model_validator(mode="after")
    def _answer_is_one_option(self) -> _Question:
        if len({option.strip().lower() for option in self.options}) < len(self.options) or not all(
                option.strip() for option in self.options):
            raise ValueError("the options must be distinct and not empty")
        if self.answer not in self.options:
            raise ValueError(f"the answer {self.answer!r} is none of the options")
        return self


def load_choice(data: str | Path, *, limit: int | None = None) -> Task:
    """The task in directory ``data``, named ``choice/<directory name>``."""
    folder = Path(data).expanduser()
    if not folder.is_dir():
        raise MissingInput(f"{folder}: not a directory; the choice task reads {TEXTS_FILE} and {QUESTIONS_FILE} "
                           "from the directory given as data (--data DIR)")
    texts = load_texts(folder)
    citable = {t.id for t in texts} | {u.id for t in texts for u in t.units}
    path = folder / QUESTIONS_FILE
    if not path.is_file():
        raise MissingInput(f"{path}: not found; a choice task directory holds {TEXTS_FILE} and {QUESTIONS_FILE}")
    records: list[tuple[Item, str | None]] = []
    seen: dict[str, int] = {}
    for number, raw in read_json_lines(path):
        record = parse_record(_Question, raw, f"{path}: line {number}")
        if record.id in seen:
            raise InputError(f"{path}: line {number}: field 'id': {record.id!r} is already the id of line {seen[record.id]}")
        seen[record.id] = number
        unknown = [e for e in record.evidence if e not in citable]
        if unknown:
            raise InputError(f"{path}: line {number}: field 'evidence': {unknown[0]!r} is no text or unit id of {TEXTS_FILE}")
        item = Item(id=record.id, question=record.question, answer=record.answer, category=record.category,
                    evidence=record.evidence, spec={"options": record.options})
        records.append((item, record.split))
    if not records:
        raise InputError(f"{path}: no questions")
    chosen = limit_items([item for item, _ in records], limit)
    kept = {item.id for item in chosen}
    return Task(name=f"choice/{folder.resolve().name}", family=FAMILY, texts=texts, items=chosen,
                test_ids=[item.id for item, split in records if split == "test" and item.id in kept],
                train_ids=[item.id for item, split in records if split == "train" and item.id in kept])


def from_config(config: ChoiceOptions) -> Task:
    assert config.data is not None, "choice needs data"  # the options refuse a choice task without it
    return load_choice(config.data, limit=config.limit)
