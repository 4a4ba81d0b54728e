"""``propose``, the blind proposer (the ``offline-random`` ablation; ``reflective.reflect`` is the offline
reflector): pick a kind at random, honour the ablation switches, fall back to other kinds when one does not
apply, and never return a program already in the population.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable, Collection, Sequence

from mstar_ray.contract import LOGIC_CLASS
from mstar_ray.reflect.offline.crossover import crossover
from mstar_ray.reflect.offline.dates import date_aware_writes, write_per_line
from mstar_ray.reflect.offline.engine import (
    Mutation, NoMutation, _methods, _module_class, _weighted_shuffle,
)
from mstar_ray.reflect.offline.evidence import quote_evidence
from mstar_ray.reflect.offline.hops import second_read
from mstar_ray.reflect.offline.instructions import edit_instruction
from mstar_ray.reflect.offline.lines import drop_long_lines
from mstar_ray.reflect.offline.perturb import perturb_numbers
from mstar_ray.reflect.offline.ranking import cap_per_source, fuse_keyword_scores
from mstar_ray.reflect.offline.table import speaker_date_table
from mstar_ray.reflect.offline.writes import filter_writes, order_by_recency


# Relative chances of each kind. Instruction edits are the least likely: offline they are neutral
# (ALWAYS_ON_KNOWLEDGE aside), so they would spend evaluations without moving the search.
KIND_WEIGHTS: dict[str, float] = {
    "perturb_numbers": 2.5,
    "crossover": 1.5,
    "filter_writes": 1.5,
    "order_by_recency": 1.5,
    "drop_long_lines": 1.5,
    "date_aware_writes": 1.5,
    "write_per_line": 1.5,
    "fuse_keyword_scores": 1.5,
    "cap_per_source": 1.5,
    "second_read": 1.5,
    "speaker_date_table": 1.5,
    "quote_evidence": 1.5,
    "edit_instruction": 1.0,
}


def _parts(source: str) -> set[str]:
    """The program's definitions (module statements and KnowledgeBase methods), as code without layout."""
    tree = ast.parse(source)
    cls = _module_class(tree, LOGIC_CLASS)
    members = list(_methods(cls).values()) if cls else []
    return {ast.dump(node) for node in tree.body + members}


def _kinship(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def _crossover_any(source: str, population: Sequence[str], rng: random.Random, avoid: Collection[str]) -> Mutation:
    """Crossover with a donor drawn by kinship: relatives share their storage, so a method or a
    helper can move between them alone and the child mixes both; between unrelated programs only
    whole designs can move, which mostly re-creates the donor. Unrelated donors stay possible."""
    donors = sorted({p for p in population if p != source})
    mine = _parts(source)
    weights = [0.25 + 4 * _kinship(mine, _parts(d)) for d in donors]
    for donor in _weighted_shuffle(donors, weights, rng):
        try:
            return crossover(source, donor, rng, avoid=avoid)
        except NoMutation:
            continue
    raise NoMutation("no donor in the population offers a consistent unit")


def propose(
    parent_source: str,
    population_sources: list[str],
    rng: random.Random,
    *,
    frozen_code: bool = False,
    frozen_instructions: bool = False,
) -> Mutation:
    """One child of ``parent_source``: a random applicable kind, honouring the ablation switches.

    ``frozen_code`` allows only instruction edits (the paper's "-Code" ablation);
    ``frozen_instructions`` never edits instructions ("-Instruction"). A kind that does not apply
    (no numeric tunable, no usable donor, filters already in place...) gives way to the next one;
    ``NoMutation`` if none applies. A child equal to a program of ``population_sources`` is never
    returned.
    """
    code_kinds = ["perturb_numbers", "crossover", "filter_writes", "order_by_recency", "drop_long_lines",
                  "date_aware_writes", "write_per_line", "fuse_keyword_scores", "cap_per_source", "second_read",
                  "speaker_date_table", "quote_evidence"]
    kinds = ([] if frozen_code else code_kinds) + ([] if frozen_instructions else ["edit_instruction"])
    single: dict[str, Callable[..., Mutation]] = {
        "perturb_numbers": perturb_numbers,
        "filter_writes": filter_writes,
        "order_by_recency": order_by_recency,
        "drop_long_lines": drop_long_lines,
        "date_aware_writes": date_aware_writes,
        "write_per_line": write_per_line,
        "fuse_keyword_scores": fuse_keyword_scores,
        "cap_per_source": cap_per_source,
        "second_read": second_read,
        "speaker_date_table": speaker_date_table,
        "quote_evidence": quote_evidence,
        "edit_instruction": edit_instruction,
    }
    # A child identical to a program already in the population would only repeat its evaluation.
    known = frozenset(population_sources)
    for kind in _weighted_shuffle(kinds, [KIND_WEIGHTS[k] for k in kinds], rng):
        try:
            if kind == "crossover":
                return _crossover_any(parent_source, population_sources, rng, known)
            return single[kind](parent_source, rng, avoid=known)
        except NoMutation:
            continue
    raise NoMutation(f"no mutation applies (allowed kinds: {', '.join(kinds) or 'none'})")
