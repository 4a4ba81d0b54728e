"""The nearest known tree to a new one: the pruned search gives exactly the brute-force minimum (bit for bit:
the logged novelty does not change) unless it spends its budget of cells, when it answers a lower bound; its
bound is a lower bound, and it spares most distances on a population of mutated programs."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mstar_ray.reflect.offline import NoMutation, propose
from mstar_ray.structure.index import StructureIndex
from mstar_ray.structure.nearest import NearestIndex, label_counts
from mstar_ray.structure.ted import normalised_distance, tree_distance
from mstar_ray.structure.tree import program_tree
from tests.conftest import seed_source
from tests.test_structure_ted import make_tree, random_nested

SEEDS = [seed_source(name) for name in ("experience_learner", "llm_summarizer", "vector_search")]


@pytest.fixture(scope="module")
def programs() -> list[str]:
    rng = random.Random(3)
    sources = list(SEEDS)
    while len(sources) < 60:
        try:
            sources.append(propose(rng.choice(sources), sources[:6], rng).source)
        except NoMutation:
            continue
    return sources


def test_the_label_bound_never_exceeds_the_edit_distance():
    rng = random.Random(11)
    trees = [make_tree(random_nested(rng, rng.randint(1, 20), rng.choice([2, 3, 30]))) for _ in range(40)]
    for a in trees:
        for b in trees:
            shared = np.minimum(label_counts(a), label_counts(b)).sum()
            assert max(a.size, b.size) - shared <= tree_distance(a, b)


def test_the_nearest_is_the_brute_force_minimum_on_random_trees():
    rng = random.Random(5)
    trees = [make_tree(random_nested(rng, rng.randint(1, 20), rng.choice([2, 3, 30]))) for _ in range(50)]
    index = NearestIndex()
    assert index.nearest(trees[0]) is None
    for i, tree in enumerate(trees):
        if i:
            brute = min(normalised_distance(tree, other) for other in trees[:i])
            within = normalised_distance(tree, trees[i - 1])  # as if its parent were the one before
            assert index.nearest(tree) == brute and index.nearest(tree, within=within) == brute
        index.add(tree)


def test_on_mutated_programs_it_is_exact_and_spares_most_distances(programs):
    index, placed = StructureIndex("names"), []
    brute_count = cut_short = 0
    for i, source in enumerate(programs):
        parent = f"p{i - 1}" if i else None
        placement = index.place(source, parent)
        tree = program_tree(source, "names")
        if placed:
            brute = min(normalised_distance(tree, other) for other in placed)
            if index._nearest.cut_short == cut_short:
                assert placement.to_population == brute
            else:  # the search spent its budget of cells (a long program): its answer is a lower bound
                assert placement.to_population is not None and placement.to_population <= brute
                cut_short = index._nearest.cut_short
            brute_count += len(placed)
        index.add(f"p{i}", placement)
        placed.append(tree)
    computed = index._nearest.computed
    assert computed < brute_count / 3, (computed, brute_count)
    assert cut_short <= len(programs) // 10, cut_short  # exact for almost every program a search makes


def test_a_population_beyond_the_map_limit_is_mapped_by_a_sample_of_its_best_and_the_rest(programs, monkeypatch):
    from types import SimpleNamespace

    from mstar_ray.structure import population_map

    index = StructureIndex("names")
    members = [SimpleNamespace(id=f"p{i}", score=(i * 37 % 60) / 60) for i in range(len(programs))]
    for member, source in zip(members, programs):
        index.learn(member.id, source)
    monkeypatch.setattr(population_map, "MAX_MAPPED", 20)
    seen: list[int] = []

    def matrix(trees):
        seen.append(len(trees))
        return population_map.pairwise(trees)

    found = population_map.map_population(members, index, seed=0, matrix=matrix)
    assert seen == [20] and len(found.ids) == 20 and found.programs == len(programs)
    best = sorted(members, key=lambda m: -m.score)[:10]
    assert {m.id for m in best} <= set(found.ids)
    assert found.ids == [m.id for m in members if m.id in set(found.ids)]  # in population order
    again = population_map.map_population(members, index, seed=0, matrix=matrix)
    assert again.ids == found.ids  # the draw is seeded
    monkeypatch.setattr(population_map, "MAX_MAPPED", 200)
    assert len(population_map.map_population(members, index, seed=0).ids) == len(programs)
