"""What a family is given to run one item, and what it must provide."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

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

    agent: Any  # the task agent (mstar_ray.agent.backend.AgentBackend); each family uses the steps it needs
    memory: Memory
    response_instruction: str  # the program's INSTRUCTION_RESPONSE
    always_on: str  # the program's ALWAYS_ON_KNOWLEDGE
    judge: LLMClient | None = None  # the run's judge model, if one is configured
    verdicts: bool = False  # whether to add the judge's verdict where the family's metric does not need it
    calls: collections.Counter[str] = field(default_factory=collections.Counter)  # steps served, by name


class Family(Protocol):
    name: str
    steps: tuple[str, ...]  # the agent steps it counts in ItemRun.calls (beside extract, query and toolkit)
    brief: str  # for the reflector's prompt: how the agent uses read() on this family and how it is scored
    # Optional: ``reads_once = True`` (each item reads memory at most once) lets an evaluation run items at
    # once, their reads in item order; without it items run one after another. ``process_per_item = True``:
    # an item holds a helper process while it runs, so items at once are bounded by ``evaluation.episodes``.

    def metric_for(self, judged: bool) -> str:
        """What an item's score is, for people ("token F1", "success"), given whether the run has a judge model:
        a family that needs one names what scores in its place (a stand-in), so every report says so."""

    def run(self, item: Item, run: ItemRun) -> ItemResult:
        """Run one item with the memory and score it in [0, 1]; never raises for a wrong or empty answer."""
