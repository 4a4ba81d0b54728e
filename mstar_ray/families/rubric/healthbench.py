"""HealthBench (OpenAI, 2025) conversations as a rubric task, from the JSONL file the user supplies. Nothing of
HealthBench ships with the project or its tests.

One JSON object per line, as HealthBench publishes them (the main, hard and consensus files alike)::

    {"prompt_id": "...",
     "prompt": [{"role": "user", "content": "..."}, ...],          # ends with the user message to answer
     "rubrics": [{"criterion": "...", "points": 5, "tags": ["axis:accuracy", ...]}, ...],
     "example_tags": ["theme:emergency_referrals", ...],            # the theme is the item's category
     "ideal_completions_data": {"ideal_completion": "..."} or null}

Other fields (``canary``, ``ideal_completions_group``...) are ignored. An item's category is its first
``theme:`` tag without the prefix. Records with an ideal completion may become training texts
(``mstar_ray.families.rubric.conversations``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from mstar_ray.exit_codes import InputError
from mstar_ray.tasks.model import Task
from mstar_ray.tasks.records import parse_record, read_json_lines
from mstar_ray.families.rubric.conversations import Criterion, Message, RubricRecord, check_conversation, check_rubric, rubric_file_task

if TYPE_CHECKING:
    from mstar_ray.families.task_options import HealthbenchOptions

THEME = "theme:"


class _Rubric(BaseModel):
    model_config = ConfigDict(extra="ignore")

    criterion: str = Field(min_length=1)
    points: float
    tags: list[str] = []


class _Ideal(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ideal_completion: str = Field(min_length=1)


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")

    prompt_id: str = Field(min_length=1)
    prompt: list[Message]
    rubrics: list[_Rubric]
    example_tags: list[str]
    ideal_completions_data: _Ideal | None = None


def _record(raw: dict[str, object], where: str) -> RubricRecord:
    record = parse_record(_Record, raw, where)
    check_conversation(record.prompt, where, "prompt")
    criteria = [Criterion.model_validate({"text": r.criterion, "points": r.points, "tags": r.tags})
                for r in record.rubrics]
    check_rubric(criteria, where, "rubrics")
    themes = [tag[len(THEME):] for tag in record.example_tags if tag.startswith(THEME) and tag[len(THEME):]]
    if not themes:
        raise InputError(f"{where}: field 'example_tags': no '{THEME}...' tag; the theme is the item's category")
    ideal = record.ideal_completions_data.ideal_completion if record.ideal_completions_data else None
    return RubricRecord(id=record.prompt_id, category=themes[0], messages=record.prompt, criteria=criteria,
                        reference=ideal, trainable=ideal is not None)


def read_healthbench(path: Path) -> list[RubricRecord]:
    return [_record(raw, f"{path}: line {number}") for number, raw in read_json_lines(path)]


def load_healthbench(data: str | Path | None, *, train_share: float = 0.5, seed: int = 0, limit: int | None = None,
                     only_categories: tuple[str, ...] | None = None) -> Task:
    """The file's conversations as a task named ``healthbench/<file stem>``; item ids are the prompt ids."""
    return rubric_file_task("healthbench", "HealthBench", data, read_healthbench, kind="JSONL file",
                            how_to_get="get one of its JSONL files (openai/simple-evals names them)",
                            train_share=train_share, seed=seed, limit=limit, only_categories=only_categories)


def from_config(config: HealthbenchOptions) -> Task:
    return load_healthbench(config.data, train_share=config.train_share, seed=config.seed, limit=config.limit,
                            only_categories=config.only_categories)
