"""Interactive episodes (embodied planning), as the M* reference frames ALFWorld: the agent plays a text game.

An item's ``spec`` is an :class:`~mstar_ray.envs.base.EpisodeSpec` (which game, its step limit, the deadline of
one environment call); its question is the episode's opening, the objective and the first observation, which
is what memory is asked from, once, at the start. Then at every step the task agent's actor picks the next
action from the admissible ones, seeing the goal, the always-on knowledge, the retrieved context, the steps so
far, the current observation and the inventory. Score 1 if the game is won within the step limit, else 0.
The episode's transcript is the item's trace, which a reflector reads for a failed episode.

The environment runs in a helper process of this one (``mstar_ray.envs.process``), kept for every episode
this process plays (one per episode played at once). An environment that hangs or crashes fails that episode, with the error in the item's
``error`` and trace; the next episode gets a fresh process.
"""

from __future__ import annotations

import time

from mstar_ray.envs.base import EnvFailure, EpisodeSpec, Observation
from mstar_ray.envs.process import EnvProcess, leased
from mstar_ray.envs.transcript import Transcript
from mstar_ray.families.base import ItemRun
from mstar_ray.families.episode.turn import Turn
from mstar_ray.results import ItemResult
from mstar_ray.tasks.model import Item

# A trace goes into a reflector's prompt (up to three of them): observations are cut, actions never are.
TRACE_OBSERVATION_CHARS = 300


def _actions(count: int) -> str:
    return f"{count} action" + ("" if count == 1 else "s")


class Episodes:
    name = "episode"
    steps = ("act",)
    reads_once = True  # at the episode's start: episodes can be played at once (mstar_ray.agent.pipeline)
    process_per_item = True  # an environment process each: how many play at once is bounded apart
    brief = (
        "Each item is an episode of a text game. The agent fills the Query from the episode's opening (its "
        "OBJECTIVE and first OBSERVATION, shown as the question) and read() is called once, at the start. At every "
        "step the agent picks the next action from the admissible actions, seeing read()'s text, "
        "ALWAYS_ON_KNOWLEDGE, INSTRUCTION_RESPONSE, the steps so far, the current observation and the inventory. "
        "Score 1 if the game is won within the step limit, else 0. The raw texts written are expert transcripts of "
        "other games (an OBJECTIVE line, OBSERVATION and ACTION lines, an OUTCOME line); a failed episode's own "
        "transcript is shown as what happened.")

    def metric_for(self, judged: bool) -> str:
        return "success"  # the game's own verdict: no judge takes part

    def run(self, item: Item, run: ItemRun) -> ItemResult:
        spec = EpisodeSpec.model_validate(item.spec)
        with leased(spec.game.env) as env:
            return self._episode(item, spec, env, run)

    def _episode(self, item: Item, spec: EpisodeSpec, env: EnvProcess, run: ItemRun) -> ItemResult:
        started = time.monotonic()
        result = ItemResult.of(item)
        try:
            observation = env.reset(spec.game, spec.step_timeout_s)
        except EnvFailure as exc:
            result.error = f"environment: {exc}"
            result.prediction = "failure: the environment broke before the first action"
            result.trace = f"{item.question}\nOUTCOME: {result.prediction} ({exc})"
            result.seconds = time.monotonic() - started
            return result
        recall = run.memory.recall(item.question)
        result.query = recall.query
        transcript = Transcript(observation.goal, observation.text, observation_chars=TRACE_OBSERVATION_CHARS)
        if recall.error is not None:
            result.error = recall.error
            result.prediction = "not played: read() failed"
        else:
            result.context = recall.context
            observation, result.prediction, broke = self._play(env, spec, observation, recall.context, run, transcript)
            result.error = broke
            result.score = 1.0 if observation.won else 0.0
        transcript.outcome(result.prediction + (f" ({result.error})" if result.error else ""))
        result.trace = transcript.text()
        result.seconds = time.monotonic() - started
        return result

    @staticmethod
    def _play(env: EnvProcess, spec: EpisodeSpec, observation: Observation, context: str, run: ItemRun,
              transcript: Transcript) -> tuple[Observation, str, str | None]:
        """Play until the game ends or the step limit: (last observation, outcome, environment error or None)."""
        history: list[tuple[str, str]] = []
        while not observation.done and len(history) < spec.step_limit:
            if not observation.actions:
                return observation, f"failure: no admissible action after {_actions(len(history))}", None
            turn = Turn(goal=observation.goal, observation=observation.text, inventory=observation.inventory,
                        history=tuple(history), actions=tuple(observation.actions))
            choice = run.agent.act(run.response_instruction, run.always_on, context, turn)
            run.calls["act"] += 1
            transcript.act(choice.action, choice.note)
            try:
                observation = env.step(choice.action, spec.step_timeout_s)
            except EnvFailure as exc:
                return observation, f"failure: the environment broke after {_actions(len(history))}", f"environment: {exc}"
            transcript.observe(observation.text)
            history.append((choice.action, observation.text))
        if observation.won:
            return observation, f"success after {_actions(len(history))}", None
        if observation.done:
            return observation, f"failure: the game ended unwon after {_actions(len(history))}", None
        return observation, f"failure: the step limit ({spec.step_limit} actions) was reached", None
