"""TextWorldExpress (PyPI ``textworld-express``, Apache-2.0): fast text games on a bundled Java engine, reached
through py4j. Its games ``twc`` (put household objects where they belong), ``cookingworld`` and ``coin``
each come in folds of 1,000 seeds: ``train``, ``dev`` and ``test`` hold different objects, so the train fold
gives seen games and the test fold unseen ones. ``generateGoldPath`` gives an expert's winning actions."""

from __future__ import annotations

import importlib.util
import re
from typing import Any
import shutil

from mstar_ray.envs.base import EnvUnavailable, GameSpec, Observation
from mstar_ray.envs.transcript import one_line
from mstar_ray.exit_codes import InputError

INSTALL = "pip install textworld-express (or pip install 'mstar-ray[textworld]')"
JAVA = ("TextWorldExpress runs its engine on Java (17 works), and no `java` is on PATH: install a JRE "
        "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or put its bin folder on PATH")
# The episode family counts actions against its own limit; the engine's must never end an episode first.
ENGINE_STEP_LIMIT = 100_000
# A reset's first observation is the engine's "look around", which its gold paths start with.
LOOK = "look around"
_PARAMS = re.compile(r"\w+=[^,=\s]+(?:,\w+=[^,=\s]+)*")


def require() -> None:
    """Raise ``EnvUnavailable`` naming the fix when this machine cannot start TextWorldExpress."""
    if importlib.util.find_spec("textworld_express") is None:
        raise EnvUnavailable(f"TextWorldExpress is not installed: {INSTALL}")
    if shutil.which("java") is None:
        raise EnvUnavailable(JAVA)


class TextWorldExpress:
    def __init__(self) -> None:
        require()
        from textworld_express import TextWorldExpressEnv

        self.env = TextWorldExpressEnv(envStepLimit=ENGINE_STEP_LIMIT)
        self.loaded: tuple[str, str] | None = None
        self.goal = ""
        self.gold: list[str] = []
        self.on_gold_path = True
        self.taken = 0

    def _load(self, game: GameSpec) -> None:
        if self.loaded != (game.game, game.params):
            names = list(self.env.getGameNames())
            if game.game not in names:
                raise InputError(f"TextWorldExpress has no game {game.game!r}; its games are {', '.join(names)}")
            if game.params and not _PARAMS.fullmatch(game.params):
                raise InputError(f"TextWorldExpress gameParams {game.params!r}: expected name=value pairs separated by "
                                 "commas, e.g. numLocations=1,includeDoors=0")
            self.env.load(game.game, game.params)  # a ValueError naming the parameter when params are wrong
            self.loaded = (game.game, game.params)

    def games(self, game: GameSpec) -> list[str]:
        self._load(game)
        seeds = {"train": self.env.getValidSeedsTrain, "dev": self.env.getValidSeedsDev,
                 "test": self.env.getValidSeedsTest}
        if game.fold not in seeds:
            raise InputError(f"TextWorldExpress has no fold {game.fold!r}; its folds are {', '.join(seeds)}")
        return [str(seed) for seed in seeds[game.fold]()]

    def reset(self, game: GameSpec) -> Observation:
        self._load(game)
        text, infos = self.env.reset(seed=game.seed, gameFold=game.fold, generateGoldPath=True)
        self.goal = infos["taskDescription"]
        gold = list(self.env.getGoldActionSequence())
        self.gold = gold[1:] if gold[:1] == [LOOK] else gold
        self.on_gold_path, self.taken = True, 0
        return self._observation(text, infos, done=False)

    def step(self, action: str) -> Observation:
        expected = self.gold[self.taken] if self.taken < len(self.gold) else None
        self.on_gold_path = self.on_gold_path and action == expected
        self.taken += 1
        text, _, done, infos = self.env.step(action)
        return self._observation(text, infos, done=done or infos["tasksuccess"] or infos["taskfailure"])

    def expert_action(self) -> str | None:
        if self.on_gold_path and self.taken < len(self.gold):
            return self.gold[self.taken]
        return None

    def _observation(self, text: str, infos: dict[str, Any], *, done: bool) -> Observation:
        return Observation(goal=self.goal, text=text, inventory=one_line(infos.get("inventory") or "") or None,
                           actions=sorted(infos["validActions"]), done=bool(done), won=bool(infos["tasksuccess"]))
