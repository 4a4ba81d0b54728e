"""A family's own model steps, on whichever task agent the run has.

The task agent is generic: its shared steps (a ``KnowledgeItem`` from a text, a ``Query`` from a question) and
one call for everything else, ``perform(step, shown, given)``. What is particular to a family (answering a
question, replying to a conversation, picking an action) is a :class:`Step` the family defines: on a model,
``prompt`` builds the chat request and ``parse`` turns the reply into the step's result; on the offline agent,
``offline`` is the rule-based stand-in for the same step. So a new kind of item brings its own prompts and
stand-in with it, and no backend changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, NamedTuple, Protocol, TypeVar

Given = TypeVar("Given")
Result = TypeVar("Result")
Messages = list[dict[str, str]]


class Shown(NamedTuple):
    """What the memory program shows the agent at a step: its ``INSTRUCTION_RESPONSE``, its
    ``ALWAYS_ON_KNOWLEDGE`` and what ``read()`` returned for the item (empty when nothing)."""

    instruction: str
    always_on: str
    context: str


@dataclass(frozen=True)
class Step(Generic[Given, Result]):
    """One of a family's own agent steps, given the memory's part (:class:`Shown`) and the family's (``Given``).

    ``name`` is the step in the run's accounts: the calls of an evaluation and the requests per step, which the
    run-wide reply cache and the budgets see. ``max_tokens`` bounds the model's reply (None: the task role's
    own ``max_tokens``). The functions must be pure: items run at once call them on several threads."""

    name: str
    prompt: Callable[[Shown, Given], Messages]
    parse: Callable[[str, Given], Result]
    offline: Callable[[Shown, Given], Result]
    max_tokens: int | None = None


class Agent(Protocol):
    """The task agent as a family uses it (``mstar_ray.agent.backend.AgentBackend`` is the whole of it)."""

    def perform(self, step: Step[Given, Result], shown: Shown, given: Given) -> Result:
        """Run ``step``: on a model, send ``step.prompt`` and ``step.parse`` the reply; offline, ``step.offline``."""
        ...
