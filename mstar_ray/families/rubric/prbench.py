"""PRBench (Scale AI, 2025: professional reasoning in law and finance) conversations as a rubric task, from a
file the user supplies: its published Parquet files (``finance``, ``legal``, ``finance_hard``, ``legal_hard``)
or the same rows as JSON Lines, as its own evaluation harness reads them. Nothing of PRBench ships here.

One row per task (fields of the release; others such as ``expert``, ``scratchpad``, ``model_i`` are ignored)::

    {"task": "...",                                    # the item's id
     "field": "Legal" | "Finance",                     # its category (lower-cased)
     "topic": "...",
     "prompt_0": "...", "reference_texts_0": ["..."],  # a user turn, its reference texts put before it
     "response_0": "...",                              # the assistant's reply to it (earlier turns only)
     ...                                               # up to prompt_9; the last prompt is the one to answer
     "rubric": [{"id": "...", "title": "...",          # the criterion as its grader sees it
                 "annotations": {"criteria_category": "...", "criteria_description": "...",
                                 "weight_class": "critically important", "critically_important_weight": 9, ...}}]}

A criterion's points are the ``<weight class>_weight`` field its ``weight_class`` names, as PRBench's harness
reads them, with the sign its class gives (the ``detrimental`` classes subtract, whichever sign the file stores);
its text is ``title`` (what PRBench's grader is shown), else ``criteria_description``; its ``criteria_category``
becomes a ``category:`` tag. The reference texts come before their prompt as ``Reference text k:`` blocks, as
PRBench's harness puts them. PRBench gives no reference responses: every record may train, with what its rubric
asks of a response written in place of one (``mstar_ray.families.rubric.conversations``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from mstar_ray.exit_codes import InputError
from mstar_ray.tasks.model import Task
from mstar_ray.tasks.records import parse_record, read_json_lines
from mstar_ray.families.rubric.conversations import Criterion, Message, RubricRecord, check_conversation, check_rubric, rubric_file_task

if TYPE_CHECKING:
    from mstar_ray.families.task_options import PrbenchOptions

MAX_TURNS = 10  # prompt_0 .. prompt_9
POSITIVE_CLASSES = ("critically important", "important", "slightly important")
NEGATIVE_CLASSES = ("slightly detrimental", "detrimental", "critically detrimental")
WEIGHT_CLASSES = POSITIVE_CLASSES + NEGATIVE_CLASSES


class _Annotations(BaseModel):
    model_config = ConfigDict(extra="allow")  # the six *_weight fields are read by name

    weight_class: str
    criteria_category: str | None = None
    criteria_description: str | None = None


class _Criterion(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | int | None = None
    title: str | None = None
    annotations: _Annotations


class _Row(BaseModel):
    model_config = ConfigDict(extra="allow")  # prompt_i, response_i, reference_texts_i

    task: str | int
    field: str = Field(min_length=1)
    topic: str | None = None
    rubric: list[_Criterion]


def _criterion(raw: _Criterion, where: str, index: int) -> Criterion:
    place = f"rubric.{index}.annotations"
    notes = raw.annotations
    weight_class = notes.weight_class.strip().lower()
    if weight_class not in WEIGHT_CLASSES:
        raise InputError(f"{where}: field '{place}.weight_class': {notes.weight_class!r} is not one of "
                         f"{', '.join(WEIGHT_CLASSES)}")
    weight_field = weight_class.replace(" ", "_") + "_weight"
    weight = (notes.model_extra or {}).get(weight_field)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight == 0:
        raise InputError(f"{where}: field '{place}.{weight_field}': the weight of a {weight_class!r} criterion must be "
                         f"a non-zero number, found {weight!r}")
    text = (raw.title or "").strip() or (notes.criteria_description or "").strip()
    if not text:
        raise InputError(f"{where}: field 'rubric.{index}.title': the criterion has no text (title or "
                         "annotations.criteria_description)")
    points = abs(weight) if weight_class in POSITIVE_CLASSES else -abs(weight)
    tags = [f"category:{notes.criteria_category}"] if notes.criteria_category else []
    return Criterion(text=text, points=points, tags=tags)


def _text(row: dict[str, Any], key: str, where: str) -> str:
    value = row.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"{where}: field {key!r}: expected a string, found {type(value).__name__}")
    return value.strip()


def _conversation(row: dict[str, Any], where: str) -> list[Message]:
    messages: list[Message] = []
    for turn in range(MAX_TURNS):
        prompt = _text(row, f"prompt_{turn}", where)
        references = row.get(f"reference_texts_{turn}") or []
        if not isinstance(references, list) or not all(isinstance(r, str) for r in references):
            raise InputError(f"{where}: field 'reference_texts_{turn}': expected a list of strings")
        if prompt:
            blocks = [f"Reference text {k}:\n{text}" for k, text in enumerate(references)]
            messages.append(Message(role="user", content="\n\n".join([*blocks, prompt])))
        response = _text(row, f"response_{turn}", where)
        if response:
            messages.append(Message(role="assistant", content=response))
    return messages


def _record(row: dict[str, Any], where: str) -> RubricRecord:
    parsed = parse_record(_Row, row, where)
    messages = _conversation(row, where)
    check_conversation(messages, where, "prompt_0")
    criteria = [_criterion(c, where, i) for i, c in enumerate(parsed.rubric)]
    check_rubric(criteria, where, "rubric")
    return RubricRecord(id=str(parsed.task), category=parsed.field.strip().lower(), messages=messages,
                        criteria=criteria, reference=None, trainable=True)


def _rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as err:  # pyarrow raises several types for a file that is not Parquet
            raise InputError(f"{path} is not a readable Parquet file: {err}") from err
        return [(f"{path}: row {number}", row) for number, row in enumerate(rows, 1)]
    return [(f"{path}: line {number}", row) for number, row in read_json_lines(path)]


def read_prbench(path: Path) -> list[RubricRecord]:
    return [_record(row, where) for where, row in _rows(path)]


def load_prbench(data: str | Path | None, *, train_share: float = 0.5, seed: int = 0, limit: int | None = None,
                 only_categories: tuple[str, ...] | None = None) -> Task:
    """The file's conversations as a task named ``prbench/<file stem>``; item ids are PRBench's task ids."""
    return rubric_file_task("prbench", "PRBench", data, read_prbench, kind="file, Parquet or JSONL",
                            how_to_get="get a split's Parquet file from the ScaleAI/PRBench dataset (or its rows as "
                                       "JSON Lines)",
                            train_share=train_share, seed=seed, limit=limit,
                            only_categories=tuple(c.lower() for c in only_categories or ()) or None)


def from_config(config: PrbenchOptions) -> Task:
    return load_prbench(config.data, train_share=config.train_share, seed=config.seed, limit=config.limit,
                        only_categories=config.only_categories)
