"""TextWorldExpress tasks (``twc``, ``cookingworld``, ``coin``): episodes of its games, seen and unseen.

Training texts are expert transcripts (the games' gold paths) of train-fold games; the search validates on
other train-fold (seen) games; the test holds out more seen games and as many test-fold games, whose objects
the train fold never shows (unseen). Every game is drawn by the task's seed, so a task is the same wherever
it is loaded; a game's id names its fold and seed (``twc-test-20417``).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, NamedTuple

from mstar_ray.envs.base import GameSpec
from mstar_ray.envs.env_process import shared
from mstar_ray.families.episode.games import Roles, draw, episode_task
from mstar_ray.tasks.model import Task

if TYPE_CHECKING:
    from mstar_ray.families.task_options import CoinOptions, CookingworldOptions, TwcOptions

SEEN_FOLD, UNSEEN_FOLD = "train", "test"


class GameDefaults(NamedTuple):
    params: str  # gameParams: small worlds, so an episode takes seconds with a model and CI stays quick
    step_limit: int  # about three times the expert's actions


GAMES: dict[str, GameDefaults] = {
    # one room, two objects to put away: the expert needs 4-5 actions
    "twc": GameDefaults("numLocations=1,numItemsToPutAway=2,includeDoors=0,limitInventorySize=0", 12),
    # one kitchen, a one-ingredient recipe to read, gather, cut and cook: about 10 actions
    "cookingworld": GameDefaults(
        "numLocations=1,numIngredients=1,numDistractorItems=0,includeDoors=0,limitInventorySize=0", 24),
    # four rooms to search for a coin: up to 6 actions
    "coin": GameDefaults("numLocations=4,numDistractorItems=2,includeDoors=0,limitInventorySize=0", 18),
}


def load(game: str, config: TwcOptions | CookingworldOptions | CoinOptions) -> Task:
    defaults = GAMES[game]
    params = defaults.params if config.game_params is None else config.game_params
    env = shared("textworld_express")
    seen = GameSpec(env="textworld_express", game=game, params=params, fold=SEEN_FOLD)
    unseen = seen.model_copy(update={"fold": UNSEEN_FOLD})
    rng = random.Random(f"textworld:{game}:{config.seed}")
    train, validation, seen_test = draw(env.games(seen, config.step_timeout_s),
                                        [config.train_games, config.validation_games, config.test_games], rng,
                                        f"{game}, fold {SEEN_FOLD}")
    (unseen_test,) = draw(env.games(unseen, config.step_timeout_s), [config.test_games], rng, f"{game}, fold {UNSEEN_FOLD}")

    def games(spec: GameSpec, seeds: list[str]) -> list[tuple[str, GameSpec]]:
        return [(f"{game}-{spec.fold}-{seed}", spec.model_copy(update={"seed": int(seed)})) for seed in seeds]

    roles = Roles(train=games(seen, train), validation=games(seen, validation), seen_test=games(seen, seen_test),
                  unseen_test=games(unseen, unseen_test))
    return episode_task(game, env, roles, step_limit=config.step_limit or defaults.step_limit,
                        step_timeout_s=config.step_timeout_s, limit=config.limit)


def twc(config: TwcOptions) -> Task:
    return load("twc", config)


def cookingworld(config: CookingworldOptions) -> Task:
    return load("cookingworld", config)


def coin(config: CoinOptions) -> Task:
    return load("coin", config)
