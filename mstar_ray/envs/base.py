"""What an episode needs of a text environment: start a game, take an action, ask the expert; and how an
environment can fail.

An adapter (``textworld_express``, ``alfworld``) implements :class:`Environment` inside the helper process
that hosts it (``mstar_ray.envs.worker``); the rest of the system talks to it through
:class:`~mstar_ray.envs.env_process.EnvProcess`, never in its own process, and never inside a memory program's
sandbox.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from mstar_ray.exit_codes import InfrastructureError

EnvKind = Literal["textworld_express", "alfworld"]


class GameSpec(BaseModel):
    """Which game to start (JSON: it travels inside an item's spec to the evaluator that plays it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    env: EnvKind
    game: str  # TextWorldExpress: the game's name (twc, cookingworld, coin); ALFWorld: the game file under data
    params: str = ""  # TextWorldExpress: its gameParams
    fold: str  # TextWorldExpress: train | dev | test; ALFWorld: train | valid_seen | valid_unseen
    seed: int = 0  # TextWorldExpress: the game's seed within its fold
    data: str | None = None  # ALFWorld: its data folder as the task was loaded (else $ALFWORLD_DATA)


class EpisodeSpec(BaseModel):
    """An item's ``spec`` for the episode family: the game and the limits it is played under."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    game: GameSpec
    step_limit: int = Field(gt=0, description="actions before the episode counts as failed")
    step_timeout_s: float = Field(gt=0, description="an environment call slower than this is a hang")


class Observation(BaseModel):
    """What the game shows after a reset or an action."""

    goal: str  # the objective, as the game states it
    text: str  # the game's reply to the last action (after a reset: its first description)
    inventory: str | None = None  # what the agent carries, where the game says so without an action
    actions: list[str]  # the admissible actions now, sorted (the engines' own order is not stable)
    done: bool = False  # the episode is over: won, lost, or ended by the game
    won: bool = False


class Environment(Protocol):
    """One game at a time, in the process that hosts the engine."""

    def games(self, game: GameSpec) -> list[str]:
        """The games of ``game.fold`` of the kind ``game`` names (seeds, or game files), in a stable order."""

    def reset(self, game: GameSpec) -> Observation:
        """Start ``game`` afresh."""

    def step(self, action: str) -> Observation:
        """Take one action (an inadmissible one too: the game answers it, as it would a player)."""

    def expert_action(self) -> str | None:
        """The expert's next action from here, when every action so far was the expert's; None when it has
        none (the game is over, or the agent left the expert's path)."""


class EnvUnavailable(InfrastructureError):
    """This machine cannot run the environment (a package or Java missing); the message names the fix."""


class EnvDataMissing(FileNotFoundError):
    """The environment's data is not where it was looked for; the message says how to get it."""


class EnvFailure(RuntimeError):
    """The environment broke during an episode: it raised, crashed or hung. The episode is a scored failure."""


class EnvHung(EnvFailure):
    """The environment did not answer within its deadline; its process was killed."""


class EnvCrashed(EnvFailure):
    """The environment's process died, or the engine inside it broke."""
