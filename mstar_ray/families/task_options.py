"""Each task's options, one pydantic model per task (the ``task`` section of a run config, keyed by ``name``).

A model lists only what its loader reads, so an option a task does not read is refused with the nearest key
that task does have (``mstar_ray.config_file``) instead of being silently ignored. Tasks that read the same
options share a base class here, which is the one place each option's meaning and bounds are written.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mstar_ray.families.qa.beam import Size
from mstar_ray.families.qa.dialogue import Granularity

# Tasks made from files the user supplies (nothing of them is shipped): what ``data`` must point at.
_DATA: dict[str, str] = {
    "beam": "the directory holding BEAM's chats (BEAM is not shipped)",
    "jsonl": "the directory holding your texts.jsonl and questions.jsonl",
    "healthbench": "HealthBench's JSONL file (HealthBench is not shipped)",
    "prbench": "a PRBench file, Parquet or JSONL (PRBench is not shipped)",
    "choice": "the directory holding your texts.jsonl and questions.jsonl (with options)",
}


class TaskOptions(BaseModel):
    """What every task reads."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    limit: int | None = Field(None, gt=0, description="at most this many items, spread over categories")


class _FileOptions(TaskOptions):
    """A task read from the user's files; ``data`` is required for the tasks of ``_DATA``."""

    data: str | None = Field(None, description="where the task's files are")

    @model_validator(mode="after")
    def _data_given(self) -> _FileOptions:
        if self.name in _DATA and not self.data:
            raise ValueError(f"task {self.name} needs data: {_DATA[self.name]}")
        return self


class _Granular(TaskOptions):
    granularity: Granularity = Field(
        "session", description="one raw text per dialogue session (the paper's) or per turn; evidence names turns")


class LocomoOptions(_FileOptions, _Granular):
    name: Literal["locomo"] = "locomo"
    data: str | None = Field(None, description="path to locomo10.json (else $MSTAR_LOCOMO_PATH)")
    conversation: int = Field(0, ge=0, description="which conversation (0-based)")
    categories: tuple[int, ...] | None = Field(None, description="its numeric categories (default 1-4)")


class SyntheticOptions(_Granular):
    name: Literal["synthetic"] = "synthetic"
    seed: int = Field(0, description="which generated world")
    # The world's size (its generator's defaults; a larger world gives more questions to split).
    sessions: int = Field(16, gt=0, description="dialogue sessions in the world")
    personas: int = Field(2, ge=2, description="people in the world (at most 6)")
    questions_per_category: int = Field(10, gt=0, description="questions per category, at most")


class BeamOptions(_FileOptions):
    name: Literal["beam"] = "beam"
    data: str | None = Field(None, description=f"{_DATA['beam']} (required)")
    conversation: int = Field(0, ge=0, description="which conversation (0-based)")
    size: Size = Field("100K", description="conversation size")


class JsonlOptions(_FileOptions):
    name: Literal["jsonl"] = "jsonl"
    data: str | None = Field(None, description=f"{_DATA['jsonl']} (required)")


class ChoiceOptions(_FileOptions):
    name: Literal["choice"] = "choice"
    data: str | None = Field(None, description=f"{_DATA['choice']} (required)")


class _RubricOptions(_FileOptions):
    seed: int = Field(0, description="which items are training texts")
    train_share: float = Field(0.5, gt=0, lt=1, description="share of the items that may train (with a reference "
                               "response) written into memory, per category; the others are evaluated")
    only_categories: tuple[str, ...] | None = Field(
        None, description="only these categories (HealthBench themes without 'theme:', PRBench fields: legal, finance)")


class HealthbenchOptions(_RubricOptions):
    name: Literal["healthbench"] = "healthbench"
    data: str | None = Field(None, description=f"{_DATA['healthbench']} (required)")


class PrbenchOptions(_RubricOptions):
    name: Literal["prbench"] = "prbench"
    data: str | None = Field(None, description=f"{_DATA['prbench']} (required)")


class _EpisodeOptions(TaskOptions):
    """Episode tasks; sized so that a search runs in minutes on 2 cores."""

    seed: int = Field(0, description="which games")
    train_games: int = Field(30, gt=0, description="expert transcripts written (train-fold games)")
    validation_games: int = Field(20, gt=0, description="seen games the search plays")
    test_games: int = Field(20, ge=0, description="held-out test games, as many seen as unseen")
    step_limit: int | None = Field(None, gt=0, description="actions before an episode fails (default: the game's)")
    step_timeout_s: float = Field(30.0, gt=0, description="an environment call slower than this is a hang: its "
                                  "process is killed and the episode fails")


class _TextWorldOptions(_EpisodeOptions):
    game_params: str | None = Field(None, description="TextWorldExpress gameParams (default: the game's small world, "
                                    "mstar_ray/families/episode/textworld_games.py)")


class TwcOptions(_TextWorldOptions):
    name: Literal["twc"] = "twc"


class CookingworldOptions(_TextWorldOptions):
    name: Literal["cookingworld"] = "cookingworld"


class CoinOptions(_TextWorldOptions):
    name: Literal["coin"] = "coin"


class AlfworldOptions(_EpisodeOptions):
    name: Literal["alfworld"] = "alfworld"
    data: str | None = Field(None, description="its data folder (else $ALFWORLD_DATA)")


# The keys the one flat options model (before each task had its own) wrote into every run directory's
# config.yaml: a task section holding exactly these is such a record, and the keys its task does not read are
# dropped, so earlier runs still resume, report and transfer.
FLAT_KEYS = frozenset({
    "name", "seed", "conversation", "data", "size", "limit", "categories", "train_share", "only_categories",
    "granularity", "train_games", "validation_games", "test_games", "game_params", "step_limit", "step_timeout_s",
})
