"""What a family is given to run one item, and what it must provide."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from mstar_ray.families.step import Agent, Given, Result, Shown, Step
from mstar_ray.results import ItemResult
from mstar_ray.tasks.model import Item

if TYPE_CHECKING:
    from mstar_ray.llm.client import LLMClient


class Recall(NamedTuple):
    """One ``read()``: the query the agent built, the context the memory returned, and how long it took.
    ``error``: the read failed without breaking the contract (the item then has no context)."""

    query: dict[str, Any]
    context: str
    seconds: float
    error: str | None = None


class Memory(Protocol):
    def recall(self, text: str, *, oracle: bool = False) -> Recall:
        """The agent turns ``text`` into the program's ``Query`` and the program's ``read()`` answers it.
        Raises ``MemoryViolation`` when the program breaks the contract: the whole evaluation then scores 0.
        ``oracle``: a diagnostic read (``mstar_ray.agent.attribution``), counted and accounted apart."""


class MemoryViolation(Exception):
    """The program broke the contract inside ``read()``; carries the sandbox's outcome and the query."""

    def __init__(self, outcome: Any, query: dict[str, Any]):
        super().__init__(outcome.message)
        self.outcome = outcome
        self.query = query


@dataclass
class ItemRun:
    """Everything a family's ``run`` may use for one item."""

    agent: Agent  # the task agent, which runs the family's own steps (``ask``)
    memory: Memory
    response_instruction: str  # the program's INSTRUCTION_RESPONSE
    always_on: str  # the program's ALWAYS_ON_KNOWLEDGE
    judge: LLMClient | None = None  # the run's judge model, if one is configured
    verdicts: bool = False  # whether to add the judge's verdict where the family's metric does not need it
    calls: collections.Counter[str] = field(default_factory=collections.Counter)  # steps served, by name

    def ask(self, step: Step[Given, Result], context: str, given: Given) -> Result:
        """The agent runs one of the family's steps, shown ``context`` (what ``read()`` returned) beside the
        program's instruction and always-on knowledge; counted in ``calls`` under the step's name."""
        self.calls[step.name] += 1
        return self.agent.perform(step, Shown(self.response_instruction, self.always_on, context), given)


class Overlap(NamedTuple):
    """Which of an item's steps may run while other items run (``mstar_ray.agent.concurrency``).

    An item's steps are its query (the agent fills the program's Query), its read, the family's own steps and
    its scoring. Reads reach the program one at a time in item order whatever this says: the knowledge base is
    one stateful process. ``across_items``: every other step of an item may run while other items' do; this
    needs each item to read memory at most once (its read holds the item's turn in that order). Without it an
    item starts when the one before it has ended (a family that reads again between its own steps).
    ``helper_process``: an item holds a helper process (an environment) while it runs, so how many run at once
    is also bounded by the run's ``evaluation.episodes``."""

    across_items: bool
    helper_process: bool = False


class Family(Protocol):
    name: str
    steps: tuple[str, ...]  # what it counts in ItemRun.calls (its Steps' names; beside extract, query and toolkit)
    brief: str  # for the reflector's prompt: how the agent uses read() on this family and how it is scored
    overlap: Overlap  # which of an item's steps may run while other items run

    def metric_for(self, judged: bool) -> str:
        """What an item's score is, for people ("token F1", "success"), given whether the run has a judge model:
        a family that needs one names what scores in its place (a stand-in), so every report says so."""

    def run(self, item: Item, run: ItemRun) -> ItemResult:
        """Run one item with the memory and score it in [0, 1]; never raises for a wrong or empty answer."""
