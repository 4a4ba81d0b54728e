"""How a reflection's parent is chosen (``search.parent_selection``): one small rule each, asked by the policy
with the population and the reflection's own seeded generator, like the stop conditions (``search.stop``).

Pure and Ray-free. ``softmax`` follows docs/design.md section 4 (softmax over static scores with temperature
tau); the paper's ablations are the others: ``greedy`` always takes the best, ``chain`` (no population) the
newest member, so the search walks one line of descent, and ``seeds`` (best-of-N) a seed, crossed over only
with seeds. ``pareto`` is ``search.pareto.ParetoParents``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal, Protocol

from mstar_ray.search.pareto import Objectives, ParetoParents
from mstar_ray.search.population import Member, Population

ParentSelection = Literal["softmax", "greedy", "chain", "pareto", "seeds"]


class ParentRule(Protocol):
    def choose(self, population: Population, rng: random.Random) -> Member:
        """The parent of the next reflection (the population is never empty here)."""

    def donors(self, population: Population) -> list[Member]:
        """The members whose code that reflection may borrow."""


class _DonorsFromAll:
    def donors(self, population: Population) -> list[Member]:
        return population.members


@dataclass(frozen=True)
class Softmax(_DonorsFromAll):
    tau: float

    def choose(self, population: Population, rng: random.Random) -> Member:
        members = population.distinct()
        weights = softmax_weights([m.score for m in members], self.tau)
        return rng.choices(members, weights=weights, k=1)[0]


class Greedy(_DonorsFromAll):
    def choose(self, population: Population, rng: random.Random) -> Member:
        return population.best()


class Chain(_DonorsFromAll):
    def choose(self, population: Population, rng: random.Random) -> Member:
        return population.members[-1]


class SeedsOnly:
    """Best-of-N: every child is one reflection of a seed, none of a child."""

    def choose(self, population: Population, rng: random.Random) -> Member:
        return rng.choice(self.donors(population) or population.members)

    def donors(self, population: Population) -> list[Member]:
        return [m for m in population.members if m.origin == "seed"]


def parent_rule(selection: ParentSelection, *, tau: float, static_ids: list[str], objectives: Objectives = "items",
                cost: bool = False) -> ParentRule:
    """The rule ``search.parent_selection`` names (``tau`` for softmax; the static set and ``search.pareto``'s
    objectives for pareto)."""
    if selection == "softmax":
        return Softmax(tau)
    if selection == "greedy":
        return Greedy()
    if selection == "chain":
        return Chain()
    if selection == "seeds":
        return SeedsOnly()
    return ParetoParents(static_ids, objectives, cost)


def softmax_weights(scores: list[float], tau: float) -> list[float]:
    if tau <= 0:
        raise ValueError("tau must be positive")
    top = max(scores)
    # Shifting by the maximum keeps exp() from overflowing; the distribution is unchanged.
    raw = [math.exp((s - top) / tau) for s in scores]
    total = sum(raw)
    return [r / total for r in raw]
