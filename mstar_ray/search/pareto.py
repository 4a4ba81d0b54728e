"""Pareto parent selection (``parent_selection: pareto``), after GEPA's: a parent is drawn from the members no
other member dominates, weighted by how many objectives each is the best on.

Selecting by the mean alone keeps choosing programs that are good on the common questions, and the hard,
long-tail categories (LoCoMo's temporal and multi-hop questions, where the M* paper's programs lag) never get
a parent that is good at them. Here every static question is an objective (``objectives: items``, GEPA's
choice), or every category's mean over the static questions (``categories``); ``cost`` adds the tokens the
member's evaluation took, fewer being better. A member is on the front if no other member is at least as good
on every objective and better on one. Each front member is weighted by the number of objectives on which it
has the population's best value (ties count for each holder), so a program that alone answers a few hard
questions stays a likely parent however low its mean.

The front is kept as members are appended (the population only grows): a newcomer dominated by a front
member stays off it for good (dominance is transitive), and one that is not removes those it dominates. So a
draw costs the front's size, not the population's. Pure and Ray-free; a resume rebuilds it from the
population replayed in order, which gives the same front.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mstar_ray.search.population import Member, Population

Objectives = Literal["items", "categories"]
# Scores closer than this are equal: a mean of F1 scores computed in two orders differs in the last bits.
TIE = 1e-12


@dataclass(frozen=True)
class FrontMember:
    member: Member
    values: tuple[float, ...]  # its objectives, in ``ParetoParents.names`` order (cost as minus the tokens)
    best_on: int  # objectives on which it has the population's best value: its weight


class ParetoParents:
    def __init__(self, static_ids: list[str], objectives: Objectives = "items", cost: bool = False):
        if not static_ids:
            raise ValueError("the static set is empty: there is nothing to compare programs on")
        self.static_ids = list(static_ids)
        self.objectives = objectives
        self.cost = cost
        self._categories: list[str] | None = None
        self._front: list[tuple[Member, np.ndarray]] = []
        self._seen = 0  # members of the population already placed

    @property
    def names(self) -> list[str]:
        """What each objective is: a static question id or a category, then ``tokens`` with ``cost``."""
        names = list(self.static_ids) if self.objectives == "items" else list(self._categories or [])
        return names + (["tokens"] if self.cost else [])

    def values(self, member: Member) -> np.ndarray:
        by_id = {r.id: r for r in member.results}
        scores = [by_id[q].score if q in by_id else 0.0 for q in self.static_ids]
        if self.objectives == "categories":
            if self._categories is None:  # fixed by the first member: every member is scored on the same questions
                self._categories = sorted({by_id[q].category for q in self.static_ids if q in by_id})
            per: dict[str, list[float]] = {c: [] for c in self._categories}
            for q, score in zip(self.static_ids, scores):
                if q in by_id and by_id[q].category in per:
                    per[by_id[q].category].append(score)
            scores = [sum(s) / len(s) if s else 0.0 for s in per.values()]
        return np.array(scores + ([-float(member.tokens)] if self.cost else []), dtype=float)

    def front(self, population: Population) -> list[FrontMember]:
        """The members no other dominates, in population order, each with its weight."""
        for member in population.members[self._seen:]:
            self._place(member)
        self._seen = len(population.members)
        if not self._front:
            return []
        matrix = np.stack([values for _, values in self._front])
        best = matrix.max(axis=0)  # the population's best on each objective is always held on the front
        wins = (matrix >= best - TIE).sum(axis=1)
        return [FrontMember(member, tuple(float(v) for v in values), int(w))
                for (member, values), w in zip(self._front, wins)]

    def _place(self, member: Member) -> None:
        values = self.values(member)
        if any(_dominates(kept, values) for _, kept in self._front):
            return
        self._front = [(m, kept) for m, kept in self._front if not _dominates(values, kept)]
        self._front.append((member, values))

    def choose(self, population: Population, rng: random.Random) -> Member:
        """A parent (``search.parents.ParentRule``): a front member, weighted by the objectives it is best on."""
        front = [entry for entry in self.front(population) if entry.best_on > 0]
        if not front:
            raise ValueError("the population is empty")
        return rng.choices([entry.member for entry in front], weights=[entry.best_on for entry in front], k=1)[0]

    def donors(self, population: Population) -> list[Member]:
        return population.members


def _dominates(a: np.ndarray, b: np.ndarray) -> bool:
    """``a`` is at least as good as ``b`` on every objective and better on one."""
    return bool(np.all(a >= b - TIE) and np.any(a > b + TIE))
