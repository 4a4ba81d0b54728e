"""Episode tasks from any environment: expert transcripts to write into memory, episodes to play.

A loader (``textworld``, ``alfworld``) names the games of four roles: the training games, whose expert
episodes become the raw texts; the validation games (seen) the search plays; and the held-out seen and unseen
games of the test (``Task.test_ids``, categories ``seen`` and ``unseen``). Every game is played by its expert
here, at load time: a training game for its transcript, any other for the expert's actions, which the item's
``answer`` shows a reflector beside the agent's outcome (as a gold answer is shown for a question).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import NamedTuple

from mstar_ray.envs.base import EpisodeSpec, GameSpec, Observation
from mstar_ray.envs.env_process import EnvProcess
from mstar_ray.envs.transcript import Transcript, opening
from mstar_ray.exit_codes import InputError
from mstar_ray.tasks.model import Item, RawText, Task, limit_items

# An expert never wanders; this only stops a broken one.
EXPERT_STEP_LIMIT = 500
SEEN, UNSEEN = "seen", "unseen"


class Roles(NamedTuple):
    """The games of each role, each with its id (stable: derived from the game alone)."""

    train: list[tuple[str, GameSpec]]
    validation: list[tuple[str, GameSpec]]
    seen_test: list[tuple[str, GameSpec]]
    unseen_test: list[tuple[str, GameSpec]]


def draw(games: Sequence[str], counts: Sequence[int], rng: random.Random, what: str) -> list[list[str]]:
    """Disjoint seeded samples of ``counts`` games from ``games``, one list per count."""
    wanted = sum(counts)
    if wanted > len(games):
        raise InputError(f"{what}: {wanted} games wanted but only {len(games)} exist")
    chosen = rng.sample(sorted(games), wanted)
    out, start = [], 0
    for count in counts:
        out.append(chosen[start:start + count])
        start += count
    return out


def expert_episode(env: EnvProcess, game: GameSpec, timeout_s: float) -> tuple[Observation, list[tuple[str, Observation]]]:
    """The game's first observation and the expert's (action, observation) steps to its end."""
    first = observation = env.reset(game, timeout_s)
    steps: list[tuple[str, Observation]] = []
    while not observation.done and len(steps) < EXPERT_STEP_LIMIT:
        action = env.expert_action(timeout_s)
        if action is None:
            break
        observation = env.step(action, timeout_s)
        steps.append((action, observation))
    return first, steps


def _won(steps: list[tuple[str, Observation]]) -> bool:
    return bool(steps) and steps[-1][1].won


def expert_text(text_id: str, first: Observation, steps: list[tuple[str, Observation]]) -> RawText:
    transcript = Transcript(first.goal, first.text)
    for action, observation in steps:
        transcript.act(action)
        transcript.observe(observation.text)
    transcript.outcome(f"{'success' if _won(steps) else 'failure'} after {len(steps)} actions")
    return RawText(id=text_id, text=transcript.text())


def episode_item(item_id: str, game: GameSpec, first: Observation, steps: list[tuple[str, Observation]],
                 category: str, step_limit: int, step_timeout_s: float) -> Item:
    actions = [action for action, _ in steps]
    expert = (f"an expert won in {len(actions)}: {'; '.join(actions)}" if _won(steps)
              else "the expert did not win this game")
    spec = EpisodeSpec(game=game, step_limit=step_limit, step_timeout_s=step_timeout_s)
    return Item(id=item_id, question=opening(first.goal, first.text), category=category, spec=spec.model_dump(),
                answer=f"success within {step_limit} actions ({expert})")


def episode_task(name: str, env: EnvProcess, roles: Roles, *, step_limit: int, step_timeout_s: float,
                 limit: int | None) -> Task:
    """Play every game's expert once and build the task: texts from the training games, items from the rest."""
    texts = []
    for text_id, game in roles.train:
        texts.append(expert_text(text_id, *expert_episode(env, game, step_timeout_s)))
    items, test_ids = [], []
    for role, category in ((roles.validation, SEEN), (roles.seen_test, SEEN), (roles.unseen_test, UNSEEN)):
        for item_id, game in role:
            items.append(episode_item(item_id, game, *expert_episode(env, game, step_timeout_s), category,
                                      step_limit, step_timeout_s))
            if role is not roles.validation:
                test_ids.append(item_id)
    items = limit_items(items, limit)
    kept = {item.id for item in items}
    return Task(name=name, family="episode", texts=texts, items=items, test_ids=[i for i in test_ids if i in kept])
