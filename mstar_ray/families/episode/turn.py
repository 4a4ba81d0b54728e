"""One step of an episode as the task agent's actor sees it, and what it picks."""

from __future__ import annotations

from typing import NamedTuple


class Turn(NamedTuple):
    """``history`` holds every (action, observation) of the episode so far, oldest first: the act step's prompt
    shows the most recent steps. ``actions`` are the admissible ones, sorted."""

    goal: str
    observation: str
    inventory: str | None
    history: tuple[tuple[str, str], ...]
    actions: tuple[str, ...]


class Choice(NamedTuple):
    """The action to take, and a note for the episode's trace when the choice needs explaining (a model's
    reply that named no admissible action, say)."""

    action: str
    note: str = ""
