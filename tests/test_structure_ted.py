"""Tree edit distance against the ``apted`` package (the reference), its metric properties, and the
matrix built from it."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from apted import APTED
from apted.helpers import Tree as AptedTree

from mstar_ray.reflect.offline import NoMutation, propose
from mstar_ray.structure.matrix import (
    assemble,
    block_distances,
    pair_blocks,
    pairwise,
)
from mstar_ray.structure.ted import (
    _zhang_shasha,
    normalise,
    normalised_distance,
    tree_distance,
)
from mstar_ray.structure.tree import Tree, program_tree
from tests.conftest import seed_source

SEEDS = [seed_source(name) for name in ("experience_learner", "llm_summarizer", "vector_search")]

Nested = tuple[int, list["Nested"]]


def make_tree(root: Nested) -> Tree:
    def postorder(node: Nested, reverse: bool, labels: list[int], sizes: list[int]) -> None:
        start = len(labels)
        for child in reversed(node[1]) if reverse else node[1]:
            postorder(child, reverse, labels, sizes)
        labels.append(node[0])
        sizes.append(len(labels) - start)

    arrays = []
    for reverse in (False, True):
        labels: list[int] = []
        sizes: list[int] = []
        postorder(root, reverse, labels, sizes)
        arrays += [np.array(labels, dtype=np.int64), np.array(sizes, dtype=np.int32)]
    return Tree(*arrays)


def random_nested(rng: random.Random, size: int, alphabet: int) -> Nested:
    """A random ordered tree: each new node hangs under a random earlier node, at a random position
    among its siblings; shapes range from paths to stars."""
    nodes: list[Nested] = [(rng.randrange(alphabet), [])]
    for _ in range(size - 1):
        parent = rng.choice(nodes)
        child: Nested = (rng.randrange(alphabet), [])
        parent[1].insert(rng.randint(0, len(parent[1])), child)
        nodes.append(child)
    return nodes[0]


def to_apted(tree: Tree) -> AptedTree:
    stack: list[tuple[AptedTree, int]] = []
    for label, size in zip(tree.labels.tolist(), tree.sizes.tolist()):
        children, covered = [], 0
        while covered < size - 1:
            child = stack.pop()
            children.append(child[0])
            covered += child[1]
        stack.append((AptedTree(str(label), *reversed(children)), size))
    assert len(stack) == 1
    return stack[0][0]


def reference(a: Tree, b: Tree) -> int:
    return APTED(to_apted(a), to_apted(b)).compute_edit_distance()


def mutants(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    found: list[str] = []
    while len(found) < count:
        try:
            found.append(propose(rng.choice(SEEDS), SEEDS + found, rng).source)
        except NoMutation:
            continue
    return found


@pytest.fixture(scope="module")
def random_trees() -> list[Tree]:
    rng = random.Random(7)
    trees = [make_tree(random_nested(rng, rng.randint(1, 25), rng.choice([2, 4, 12]))) for _ in range(40)]
    # the extremes of Zhang-Shasha's cost: a path (one keyroot) and a star (every leaf a keyroot)
    path: Nested = (0, [])
    for label in range(1, 12):
        path = (label % 3, [path])
    trees += [make_tree(path), make_tree((0, [(i % 3, []) for i in range(12)]))]
    return trees


def test_equals_apted_on_random_trees(random_trees):
    pairs = list(itertools.combinations(range(len(random_trees)), 2))
    for i, j in random.Random(1).sample(pairs, 300):
        a, b = random_trees[i], random_trees[j]
        assert tree_distance(a, b) == reference(a, b), (i, j)


def test_both_decompositions_equal_apted(random_trees):
    # the public function picks one orientation per pair; check each on its own
    for a, b in itertools.islice(itertools.combinations(random_trees, 2), 0, None, 13):
        expected = reference(a, b)
        assert _zhang_shasha(a.labels, a.sizes, b.labels, b.sizes) == expected
        assert _zhang_shasha(a.mirror_labels, a.mirror_sizes, b.mirror_labels, b.mirror_sizes) == expected


def test_equals_apted_on_real_programs():
    # the reference takes about half a second per pair of seed-size programs; four pairs, two levels
    children = mutants(1)
    pairs = [(SEEDS[0], SEEDS[1], "exact"), (SEEDS[2], children[0], "exact"), (SEEDS[1], SEEDS[2], "shape"),
             (SEEDS[0], children[0], "names")]
    for first, second, level in pairs:
        a, b = program_tree(first, level), program_tree(second, level)
        assert tree_distance(a, b) == reference(a, b)


def test_metric_properties(random_trees):
    rng = random.Random(3)
    for tree in random_trees:
        assert tree_distance(tree, tree) == 0 and normalised_distance(tree, tree) == 0.0
    for a, b in itertools.combinations(random_trees[:20], 2):
        d = tree_distance(a, b)
        assert d == tree_distance(b, a)
        assert (d == 0) == (np.array_equal(a.labels, b.labels) and np.array_equal(a.sizes, b.sizes))
        assert abs(a.size - b.size) <= d <= a.size + b.size
        assert 0.0 <= normalised_distance(a, b) < 1.0
    for _ in range(300):
        a, b, c = rng.sample(random_trees, 3)
        assert tree_distance(a, c) <= tree_distance(a, b) + tree_distance(b, c)
        assert normalised_distance(a, c) <= normalised_distance(a, b) + normalised_distance(b, c) + 1e-12


def test_normalisation():
    assert normalise(0, 5, 7) == 0.0
    assert normalise(12, 5, 7) == 1.0  # the most two trees of 5 and 7 nodes could be apart
    assert normalise(3, 4, 4) == pytest.approx(6 / 11)
    single_a, single_b = make_tree((1, [])), make_tree((2, []))
    assert normalised_distance(single_a, single_b) == pytest.approx(2 / 3)


def test_coarser_levels_are_never_farther_apart():
    # abstraction only merges labels, so renames can only become free
    sources = SEEDS + mutants(2, seed=5)
    for first, second in itertools.combinations(sources, 2):
        exact, names, shape = (tree_distance(program_tree(first, lv), program_tree(second, lv))
                               for lv in ("exact", "names", "shape"))
        assert exact >= names >= shape and exact > 0


def test_pair_blocks_cover_every_pair_once():
    for n, blocks in [(0, 3), (1, 3), (2, 3), (5, 1), (5, 3), (7, 50)]:
        split = pair_blocks(n, blocks)
        flat = [pair for block in split for pair in block]
        assert sorted(flat) == [(i, j) for i in range(n) for j in range(i + 1, n)]
        assert len(split) == min(blocks, n * (n - 1) // 2) and all(split)
        assert max(map(len, split), default=0) - min(map(len, split), default=0) <= 1
    with pytest.raises(ValueError):
        pair_blocks(4, 0)


def test_matrix_from_blocks_equals_pairwise(random_trees):
    trees = random_trees[:9]
    full = pairwise(trees)
    assert full.shape == (9, 9) and np.all(np.diag(full) == 0) and np.array_equal(full, full.T)
    for i, j in itertools.combinations(range(9), 2):
        assert full[i, j] == normalised_distance(trees[i], trees[j])
    split = pair_blocks(9, 4)
    assert np.array_equal(assemble(9, split, [block_distances(trees, pairs) for pairs in split]), full)
    with pytest.raises(ValueError):
        assemble(9, split, [block_distances(trees, pairs)[:-1] for pairs in split])
