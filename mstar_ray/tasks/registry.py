"""One entry point that turns a task's options (the ``task`` section of a run config, or ``eval``'s flags)
into a :class:`Task`: every task name, its loader, and the options they read.

A task is data for one family (``mstar_ray.families``): a loader reads the user's files (or generates a world)
and returns the texts to write and the items to run, with ``Task.family`` naming how they are run and scored.
Adding a task is adding a loader to ``_LOADERS``; nothing else in the system names tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mstar_ray.tasks.beam import SIZES as BEAM_SIZES
from mstar_ray.tasks.dialogue import GRANULARITIES
from mstar_ray.tasks.model import Task

# name -> (module, loader): imported on first use, so that picking one task never pays for (or breaks on) the
# others' modules; each loader takes the TaskConfig.
_LOADERS: dict[str, tuple[str, str]] = {
    "locomo": ("mstar_ray.tasks.locomo", "from_config"),
    "synthetic": ("mstar_ray.tasks.synthetic", "from_config"),
    "beam": ("mstar_ray.tasks.beam", "from_config"),
    "jsonl": ("mstar_ray.tasks.jsonl", "from_config"),
    "healthbench": ("mstar_ray.tasks.healthbench", "from_config"),
    "prbench": ("mstar_ray.tasks.prbench", "from_config"),
    "twc": ("mstar_ray.tasks.textworld", "twc"),
    "cookingworld": ("mstar_ray.tasks.textworld", "cookingworld"),
    "coin": ("mstar_ray.tasks.textworld", "coin"),
    "alfworld": ("mstar_ray.tasks.alfworld", "from_config"),
}
TASK_NAMES: tuple[str, ...] = tuple(_LOADERS)
# Tasks made from files the user supplies (nothing of them is shipped): what ``data`` must point at.
_DATA: dict[str, str] = {
    "beam": "the directory holding BEAM's chats (BEAM is not shipped)",
    "jsonl": "the directory holding your texts.jsonl and questions.jsonl",
    "healthbench": "HealthBench's JSONL file (HealthBench is not shipped)",
    "prbench": "a PRBench file, Parquet or JSONL (PRBench is not shipped)",
}


class TaskConfig(BaseModel):
    """The task's options. One flat shape for every task: an option a task does not read is ignored, so one
    config drives any task (``mstar-ray transfer`` swaps only the name and the data)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Literal[TASK_NAMES] = "synthetic"
    seed: int = Field(0, description="synthetic: which generated world; healthbench, prbench: which items are "
                      "training texts; episode tasks: which games")
    conversation: int = Field(0, ge=0, description="locomo, beam: which conversation (0-based)")
    data: str | None = Field(None, description="locomo: path to locomo10.json (else $MSTAR_LOCOMO_PATH); "
                             "alfworld: its data folder (else $ALFWORLD_DATA); "
                             + "; ".join(f"{name}: {what} (required)" for name, what in _DATA.items()))
    size: Literal[BEAM_SIZES] = Field("100K", description="beam: conversation size")
    limit: int | None = Field(None, gt=0, description="at most this many items, spread over categories")
    categories: tuple[int, ...] | None = Field(None, description="locomo: its numeric categories (default 1-4)")
    train_share: float = Field(0.5, gt=0, lt=1, description="healthbench, prbench: share of the items that may train "
                               "(with a reference response) written into memory, per category; the others are evaluated")
    only_categories: tuple[str, ...] | None = Field(
        None, description="healthbench, prbench: only these categories (HealthBench themes without 'theme:', "
        "PRBench fields: legal, finance)")
    # The synthetic world's size (its generator's defaults; a larger world gives more questions to split).
    sessions: int = Field(16, gt=0, description="synthetic: dialogue sessions in the world")
    personas: int = Field(2, ge=2, description="synthetic: people in the world (at most 6)")
    questions_per_category: int = Field(10, gt=0, description="synthetic: questions per category, at most")
    granularity: Literal[GRANULARITIES] = Field(
        "session", description="one raw text per dialogue session (the paper's) or per turn; evidence names turns")
    # Episode tasks (twc, cookingworld, coin, alfworld); sized so that a search runs in minutes on 2 cores.
    train_games: int = Field(30, gt=0, description="episode tasks: expert transcripts written (train-fold games)")
    validation_games: int = Field(20, gt=0, description="episode tasks: seen games the search plays")
    test_games: int = Field(20, ge=0, description="episode tasks: held-out test games, as many seen as unseen")
    game_params: str | None = Field(None, description="twc, cookingworld, coin: TextWorldExpress gameParams "
                                    "(default: the game's small world, mstar_ray/tasks/textworld.py)")
    step_limit: int | None = Field(None, gt=0, description="episode tasks: actions before an episode fails "
                                   "(default: the game's)")
    step_timeout_s: float = Field(30.0, gt=0, description="episode tasks: an environment call slower than this is a "
                                  "hang: its process is killed and the episode fails")

    @model_validator(mode="after")
    def _data_given(self) -> TaskConfig:
        if self.name in _DATA and not self.data:
            raise ValueError(f"task {self.name} needs data: {_DATA[self.name]}")
        return self


def _loader(name: str) -> Callable[[TaskConfig], Task]:
    module, function = _LOADERS[name]
    return getattr(import_module(module), function)


def task_from_config(config: TaskConfig) -> Task:
    return _loader(config.name)(config)


def load_task(name: str, **options) -> Task:
    """The named task with ``options`` (``TaskConfig``'s fields); an unknown name lists the valid ones."""
    key = name.strip().lower()
    if key not in _LOADERS:
        raise ValueError(f"unknown task {name!r}; valid task names: {', '.join(TASK_NAMES)}")
    return task_from_config(TaskConfig(name=key, **options))
