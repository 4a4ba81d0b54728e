"""Interactive episodes (embodied planning), as the M* reference frames ALFWorld: the agent plays a text game.

An item's ``spec`` is an :class:`~mstar_ray.envs.base.EpisodeSpec` (which game, its step limit, the deadline of
one environment call); its question is the episode's opening, the objective and the first observation, which
is what memory is asked from, once, at the start. Then at every step the task agent's actor picks the next
action from the admissible ones, seeing the goal, the always-on knowledge, the retrieved context, the steps so
far, the current observation and the inventory. Score 1 if the game is won within the step limit, else 0.
The episode's transcript is the item's trace, which a reflector reads for a failed episode.

The environment runs in a helper process of this one (``mstar_ray.envs.env_process``), kept for every episode
this process plays (one per episode played at once). An environment that hangs or crashes fails that episode, with the error in the item's
``error`` and trace; the next episode gets a fresh process.
"""

from __future__ import annotations

import time

from mstar_ray.envs.base import EnvFailure, EpisodeSpec, Observation
from mstar_ray.envs.env_process import EnvProcess, leased
from mstar_ray.envs.transcript import Transcript
from mstar_ray.families.base import ItemRun, Overlap
from mstar_ray.families.episode import offline
from mstar_ray.families.episode.actions import explore, match_reply
from mstar_ray.families.episode.turn import Choice, Turn
from mstar_ray.families.step import Messages, Shown, Step
from mstar_ray.results import ItemResult
from mstar_ray.tasks.model import Item

# A trace goes into a reflector's prompt (up to three of them): observations are cut, actions never are.
TRACE_OBSERVATION_CHARS = 300
# An action is a short phrase; a longer reply is the model talking, and costs every step of every episode.
ACT_MAX_TOKENS = 24
ACT_HISTORY_STEPS = 6  # the most recent steps of the episode shown in each actor prompt
ACT_OBSERVATION_CHARS = 200  # each earlier observation, cut to this (the current one is shown whole)
ACT_SYSTEM = ("You play a text game. Reply with one action copied exactly from the list of admissible actions, and "
              "nothing else.")


def act_prompt(shown: Shown, turn: Turn) -> Messages:
    recent = turn.history[-ACT_HISTORY_STEPS:]
    steps = "\n".join(f"> {action}\n{observation.strip()[:ACT_OBSERVATION_CHARS]}" for action, observation in recent)
    parts = [
        shown.always_on.strip(),
        f"Memory:\n{shown.context}" if shown.context else "Memory: (empty)",
        shown.instruction,
        f"Goal: {turn.goal}",
        f"Your last {len(recent)} of {len(turn.history)} steps:\n{steps}" if recent else "No steps taken yet.",
        f"Now: {turn.observation.strip()}",
        f"{turn.inventory}" if turn.inventory else "",
        # The list last, as a question: asked "reply with one action" after it, SmolLM2-135M echoed the goal or
        # the room in 8 prompts of 8; asked this way it named an admissible action in 5.
        "Which of these actions do you take next?\n" + "\n".join(f"- {action}" for action in turn.actions),
    ]
    return [{"role": "system", "content": ACT_SYSTEM},
            {"role": "user", "content": "\n\n".join(part for part in parts if part)}]


def admissible(reply: str, turn: Turn) -> Choice:
    """The reply matched to an admissible action (exactly, by containing one, or by words: ``actions.match_reply``);
    a reply that matches none takes the fixed exploration's action instead, with a note in the trace saying so."""
    action, how = match_reply(reply, turn.actions)
    if action is None:
        return Choice(explore(turn), f"the model replied {reply.strip()[:80]!r}, no admissible action: explored")
    return Choice(action, "" if how == "exact" else f"the model replied {reply.strip()[:80]!r}")


ACT = Step("act", prompt=act_prompt, parse=admissible, offline=offline.act, max_tokens=ACT_MAX_TOKENS)


def _actions(count: int) -> str:
    return f"{count} action" + ("" if count == 1 else "s")


class Episodes:
    name = "episode"
    steps = (ACT.name,)
    overlap = Overlap(across_items=True, helper_process=True)  # one read, at the start; an environment process each
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
            choice = run.ask(ACT, context, turn)
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
