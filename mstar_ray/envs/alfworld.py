"""ALFWorld (PyPI ``alfworld``, MIT): household tasks from ALFRED as TextWorld games, the M* paper's embodied
benchmark. Its data (about 2 GB of game files) is fetched by ALFWorld's own ``alfworld-download`` into
``$ALFWORLD_DATA`` (default ``~/.cache/alfworld``); nothing of it is shipped here. Folds: ``train`` (3,553
games), ``valid_seen`` (seen rooms and objects) and ``valid_unseen`` (unseen ones); the hand-coded expert
(``AlfredExpert``, ALFWorld 0.3 or later) gives each game's winning actions one step at a time.

Written against ALFWorld's published API (``alfworld.agents.environment.alfred_tw_env``) and TextWorld's gym
interface; this machine cannot download the data, so only the checks that name what is missing have run here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from typing import Any
from pathlib import Path

from mstar_ray.envs.base import EnvDataMissing, EnvUnavailable, GameSpec, Observation
from mstar_ray.exit_codes import InputError

INSTALL = ("ALFWorld is not installed: pip install 'alfworld>=0.3' (it brings TextWorld); its data comes from "
           "alfworld-download on a machine with internet, given here as the task's data or $ALFWORLD_DATA")
FOLDS = ("train", "valid_seen", "valid_unseen")
GAMES_DIR = "json_2.1.1"
GAME_FILE = "game.tw-pddl"
ENGINE_STEP_LIMIT = 100_000  # the episode family counts actions against its own limit
_TASK = re.compile(r"Your task is to:\s*(.+)", re.IGNORECASE)
_BANNER = re.compile(r"-=\s*Welcome to TextWorld, ALFRED!\s*=-", re.IGNORECASE)


def require() -> None:
    if importlib.util.find_spec("alfworld") is None or importlib.util.find_spec("textworld") is None:
        raise EnvUnavailable(INSTALL)


def data_dir(given: str | None) -> Path:
    """ALFWorld's data folder: ``given`` (the task's ``data``), else ``$ALFWORLD_DATA``, else ALFWorld's default;
    ``EnvDataMissing`` saying how to get it when it holds no games."""
    folder = Path(given or os.environ.get("ALFWORLD_DATA") or Path.home() / ".cache" / "alfworld").expanduser()
    if not (folder / GAMES_DIR).is_dir():
        raise EnvDataMissing(
            f"ALFWorld's games are not in {folder} (no {GAMES_DIR}/ there): on a machine with internet run "
            "`pip install alfworld && alfworld-download` (it writes ~/.cache/alfworld, or $ALFWORLD_DATA), copy that "
            "folder here, and give it as the task's data (--data DIR, task.data) or in $ALFWORLD_DATA")
    return folder


def _solvable(game_file: Path) -> bool:
    """ALFWorld marks each generated game file solvable or not; its own loader skips the unsolvable."""
    try:
        return bool(json.loads(game_file.read_text(encoding="utf-8")).get("solvable"))
    except (OSError, ValueError):
        return False


def fold_games(data: str | None, fold: str) -> list[str]:
    """The solvable games of ``fold``, as paths under the data folder, sorted (as ALFWorld's own loader finds them,
    without its package: only files are read)."""
    if fold not in FOLDS:
        raise InputError(f"ALFWorld has no fold {fold!r}; its folds are {', '.join(FOLDS)}")
    folder = data_dir(data)
    found = []
    for trial in sorted((folder / GAMES_DIR / fold).glob(f"*/*/{GAME_FILE}")):
        # ALFWorld's own loader leaves out the movable-receptacle and sliced-object tasks, as do we.
        if "movable" in str(trial) or "Sliced" in str(trial) or not (trial.parent / "traj_data.json").is_file():
            continue
        if _solvable(trial):
            found.append(trial.relative_to(folder).as_posix())
    if not found:
        raise EnvDataMissing(f"no solvable ALFWorld game under {folder / GAMES_DIR / fold}")
    return found


class ALFWorld:
    def __init__(self) -> None:
        require()
        self.env: Any = None  # textworld's gym environment (no type information), made on the first reset
        self.goal = ""
        self.expert: str | None = None

    def games(self, game: GameSpec) -> list[str]:
        return fold_games(game.data, game.fold)

    def reset(self, game: GameSpec) -> Observation:
        import textworld
        import textworld.gym
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredExpertType, AlfredInfos

        path = data_dir(game.data) / game.game
        if not path.is_file():
            raise EnvDataMissing(f"ALFWorld game file {path} not found")
        if self.env is not None:
            self.env.close()
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile", "expert_plan"])
        wrappers = [AlfredDemangler(shuffle=False), AlfredInfos, AlfredExpert(AlfredExpertType.HANDCODED)]
        env_id = textworld.gym.register_games([str(path)], infos, batch_size=1, asynchronous=False,
                                              max_episode_steps=ENGINE_STEP_LIMIT, wrappers=wrappers)
        self.env = textworld.gym.make(env_id)
        texts, infos = self.env.reset()
        found = _TASK.search(texts[0])
        self.goal = found.group(1).strip() if found else ""
        first = _BANNER.sub("", _TASK.sub("", texts[0])).strip()
        return self._observation(first, infos, done=False)

    def step(self, action: str) -> Observation:
        texts, _, dones, infos = self.env.step([action])
        return self._observation(texts[0], infos, done=bool(dones[0]))

    def expert_action(self) -> str | None:
        return self.expert

    def _observation(self, text: str, infos: dict[str, Any], *, done: bool) -> Observation:
        won = bool(infos["won"][0])
        plan = infos.get("extra.expert_plan", [[]])[0]
        self.expert = plan[0] if plan and not (done or won) else None
        return Observation(goal=self.goal, text=text, actions=sorted(infos["admissible_commands"][0]),
                           done=done or won, won=won)
