"""The ALFWorld task: its household games as episodes, as the M* paper evaluates them.

Training texts are the hand-coded expert's transcripts of ``train`` games; the search validates on other train
games; the test holds out ``valid_seen`` games (category ``seen``) and ``valid_unseen`` games (``unseen``), ALFWorld's
own in- and out-of-distribution splits. Needs the ``alfworld`` package and its data (``data``, else
``$ALFWORLD_DATA``), which cannot be downloaded on every machine: without them the error says how to get them.
"""

from __future__ import annotations

import random
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from mstar_ray.envs.base import GameSpec
from mstar_ray.envs.env_process import shared
from mstar_ray.families.episode.games import Roles, draw, episode_task
from mstar_ray.tasks.model import Task

if TYPE_CHECKING:
    from mstar_ray.families.task_options import AlfworldOptions

TRAIN_FOLD, SEEN_FOLD, UNSEEN_FOLD = "train", "valid_seen", "valid_unseen"
STEP_LIMIT = 50  # the M* reference's and ALFWorld's own evaluation limit
# Listing a fold reads every game file for its "solvable" mark: the train fold's 3,553 take a while.
LIST_TIMEOUT_S = 600.0


def _game_id(fold: str, game_file: str) -> str:
    """``alfworld-valid_seen-pick_and_place_simple-Book-None-SideTable-329-trial_T2019...``: task and trial."""
    task, trial = PurePosixPath(game_file).parts[-3:-1]
    return f"alfworld-{fold}-{task}-{trial}"


def from_config(config: AlfworldOptions) -> Task:
    env = shared("alfworld")
    timeout = config.step_timeout_s

    def fold(name: str, counts: list[int]) -> list[list[tuple[str, GameSpec]]]:
        template = GameSpec(env="alfworld", game="", fold=name, data=config.data)
        drawn = draw(env.games(template, max(timeout, LIST_TIMEOUT_S)), counts, rng, f"alfworld, fold {name}")
        return [[(_game_id(name, game), template.model_copy(update={"game": game})) for game in games] for games in drawn]

    rng = random.Random(f"alfworld:{config.seed}")
    train, validation = fold(TRAIN_FOLD, [config.train_games, config.validation_games])
    (seen_test,) = fold(SEEN_FOLD, [config.test_games])
    (unseen_test,) = fold(UNSEEN_FOLD, [config.test_games])
    roles = Roles(train=train, validation=validation, seen_test=seen_test, unseen_test=unseen_test)
    return episode_task("alfworld", env, roles, step_limit=config.step_limit or STEP_LIMIT,
                        step_timeout_s=timeout, limit=config.limit)
