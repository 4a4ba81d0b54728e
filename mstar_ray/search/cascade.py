"""Cascade evaluation (``search.cascade``): what a program must score on the slice to go on to its full
evaluation. Ray-free and pure: the policy asks a rule for the bar when a screening finishes.

Every program is first evaluated on a slice of the static set (``Split.screen``: one question per k-means
cluster of the static questions, with their own texts written), and only a program that can still be worth it
pays for the full evaluation. The bar is set against the same measurement of others, never against a full
static score: every member of the population was screened on the same slice with the same texts, so its
slice score is the comparable figure. A seed always goes on: it is the baseline, not a challenger.

- ``parent``: its parent's slice score less a margin (a child that does much worse than where it came from
  on the same questions is unlikely to be better on all of them);
- ``quantile``: that quantile of the population's slice scores (a child must be competitive with the
  programs already there, whoever its parent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

# Means of the same scores taken in another order differ in the last bits: a tie is a pass.
TIE = 1e-12


class CascadeRule(Protocol):
    def bar(self, parent_score: float | None, population_scores: Sequence[float]) -> float | None:
        """The slice score a child needs to go on, from its parent's slice score and the population's; None:
        nothing to compare with, it goes on."""


@dataclass(frozen=True)
class ParentMargin:
    margin: float

    def bar(self, parent_score: float | None, population_scores: Sequence[float]) -> float | None:
        return None if parent_score is None else parent_score - self.margin


@dataclass(frozen=True)
class PopulationQuantile:
    quantile: float

    def bar(self, parent_score: float | None, population_scores: Sequence[float]) -> float | None:
        if not len(population_scores):
            return None
        return float(np.quantile(np.asarray(population_scores, dtype=float), self.quantile))


def cascade_rule(rule: str, *, margin: float, quantile: float) -> CascadeRule:
    """The rule ``search.cascade.rule`` names, with its parameter."""
    if rule == "parent":
        return ParentMargin(margin)
    if rule == "quantile":
        return PopulationQuantile(quantile)
    raise ValueError(f"unknown cascade rule {rule!r}; expected parent or quantile")


def passes(score: float, bar: float | None) -> bool:
    return bar is None or score >= bar - TIE
