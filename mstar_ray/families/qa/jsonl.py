"""A question-answering task from a user's own data: a directory with two JSON Lines files.

``texts.jsonl``: one raw text per line, written into memory in file order::

    {"id": "t1", "text": "[3 May 2024] Ann: I moved to Lisbon.", "units": [{"id": "t1:1", "start": 13, "end": 36}]}

``units`` is optional: finer pieces of the text that questions may cite as evidence (``text[start:end]``); a
text without units is one piece, cited by its own id.

``questions.jsonl``: one question per line::

    {"id": "q1", "question": "Where does Ann live?", "answer": "Lisbon", "category": "single-hop",
     "evidence": ["t1:1"], "split": "test"}

``evidence`` (ids of texts or units) and ``split`` are optional. ``split: "test"`` holds the question out
for the final test, as a benchmark's own test split; when no question says so, the search holds out a share
of every category. ``split: "train"`` makes it a training question: the reflector may see it fail (the
rotating set), but it is never part of the fitness (the static set), which is chosen among the others. Every problem is reported with the file, the line and the field, and nothing is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mstar_ray.exit_codes import InputError, MissingInput
from mstar_ray.tasks.model import EvidenceUnit, Item, RawText, Task, limit_items

if TYPE_CHECKING:
    from mstar_ray.families.task_options import JsonlOptions

TEXTS_FILE = "texts.jsonl"
QUESTIONS_FILE = "questions.jsonl"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*", mode="after")
    @classmethod
    def _no_blank_strings(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must not be empty")
        return value


class _Unit(_Record):
    id: str
    start: int = Field(ge=0)
    end: int = Field(gt=0)


class _Text(_Record):
    id: str
    text: str
    units: list[_Unit] = []


class _Question(_Record):
    id: str
    question: str
    answer: str
    category: str
    evidence: list[str] = []
    split: Literal["test", "train"] | None = None


Record = TypeVar("Record", bound=_Record)


def _field_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(the record)"
    more = err.error_count() - 1
    return f"field {where}: {first['msg']}" + (f" (and {more} more problems on this line)" if more > 0 else "")


def _read(path: Path, model: type[Record]) -> list[tuple[int, Record]]:
    if not path.is_file():
        raise MissingInput(f"{path}: not found; a jsonl task directory holds {TEXTS_FILE} and {QUESTIONS_FILE} "
                           "(docs/howto/own-task-jsonl.md gives their fields)")
    records: list[tuple[int, Record]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text: {err}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{path} line {number}: not JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(raw, dict):
            raise InputError(f"{path} line {number}: expected a JSON object, found {type(raw).__name__}")
        try:
            records.append((number, model.model_validate(raw)))
        except ValidationError as err:
            raise InputError(f"{path} line {number}: {_field_error(err)}") from None
    if not records:
        raise InputError(f"{path}: no records")
    return records


def _unique(path: Path, records: list[tuple[int, _Text]] | list[tuple[int, _Question]]) -> None:
    seen: dict[str, int] = {}
    for number, record in records:
        if record.id in seen:
            raise InputError(f"{path} line {number}: field id: {record.id!r} is already the id of line {seen[record.id]}")
        seen[record.id] = number


def load_texts(folder: str | Path) -> list[RawText]:
    """The raw texts of a directory holding ``texts.jsonl`` (a history without questions, for ``supervise``)."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise MissingInput(f"{path}: not a directory holding {TEXTS_FILE}")
    return _texts(path / TEXTS_FILE)


def _texts(path: Path) -> list[RawText]:
    records = _read(path, _Text)
    _unique(path, records)
    texts = []
    for number, record in records:
        for index, unit in enumerate(record.units):
            if unit.end > len(record.text) or unit.start >= unit.end:
                raise InputError(f"{path} line {number}: field units.{index}: spans {unit.start}..{unit.end}, outside "
                                 f"the text's {len(record.text)} characters")
        texts.append(RawText(id=record.id, text=record.text,
                             units=[EvidenceUnit(id=u.id, start=u.start, end=u.end) for u in record.units]))
    return texts


def load_jsonl(data: str | Path, *, limit: int | None = None) -> Task:
    """The task in directory ``data``, named ``jsonl/<directory name>``."""
    folder = Path(data).expanduser()
    if not folder.is_dir():
        raise MissingInput(f"{folder}: not a directory; the jsonl task reads {TEXTS_FILE} and {QUESTIONS_FILE} "
                           "from the directory given as data (--data DIR)")
    texts = _texts(folder / TEXTS_FILE)
    citable = {t.id for t in texts} | {u.id for t in texts for u in t.units}
    path = folder / QUESTIONS_FILE
    records = _read(path, _Question)
    _unique(path, records)
    items = []
    for number, record in records:
        for index, evidence in enumerate(record.evidence):
            if evidence not in citable:
                raise InputError(f"{path} line {number}: field evidence.{index}: {evidence!r} is no text or unit id "
                                 f"of {TEXTS_FILE}")
        items.append((Item(id=record.id, question=record.question, answer=record.answer, category=record.category,
                           evidence=record.evidence), record.split))
    chosen = limit_items([item for item, _ in items], limit)
    kept = {item.id for item in chosen}
    return Task(name=f"jsonl/{folder.resolve().name}", texts=texts, items=chosen,
                test_ids=[item.id for item, split in items if split == "test" and item.id in kept],
                train_ids=[item.id for item, split in items if split == "train" and item.id in kept])


def write_jsonl(out: Path, texts: list[RawText], items: list[Item], splits: dict[str, str] | None = None) -> None:
    """Write texts and question items as a jsonl task directory (``splits``: item id -> its ``split`` mark)."""
    out.mkdir(parents=True, exist_ok=True)
    splits = splits or {}
    text_records = [{"id": t.id, "text": t.text, **({"units": [u.model_dump() for u in t.units]} if t.units else {})}
                    for t in texts]
    question_records = [{"id": q.id, "question": q.question, "answer": q.answer, "category": q.category,
                         **({"evidence": q.evidence} if q.evidence else {}),
                         **({"split": splits[q.id]} if q.id in splits else {})} for q in items]
    for name, records in ((TEXTS_FILE, text_records), (QUESTIONS_FILE, question_records)):
        (out / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def from_config(config: JsonlOptions) -> Task:
    assert config.data is not None, "jsonl needs data"  # the options refuse a jsonl task without it
    return load_jsonl(config.data, limit=config.limit)
