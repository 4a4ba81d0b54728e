"""Normalised tree edit distances between many programs, whole or in blocks.

A population's matrix has n(n-1)/2 independent pairs; ``pair_blocks`` splits them so a caller can
compute the blocks anywhere (``mstar_ray.actors.structure_tasks`` runs them as Ray tasks) and
``assemble`` puts the answers back. ``pairwise`` is the same thing in one process.

The programs are candidates' (untrusted), and each exact distance may fill up to ``ted.MAX_DISTANCE_CELLS``: 200
mapped programs shaped near that cap would be hours of a run's end. ``plan`` bounds the whole matrix by construction:
the pairs whose exact distances fit ``MAX_MATRIX_CELLS`` in all, cheapest first, are computed exactly, and each
other pair reads a lower bound of its distance from the two trees' label counts (``nearest.label_counts``),
all of them in one vectorised pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mstar_ray.structure.nearest import label_counts
from mstar_ray.structure.ted import MAX_DISTANCE_CELLS, distance_cells, normalise, normalised_distance
from mstar_ray.structure.tree import Tree

Pair = tuple[int, int]
# The table cells a population's matrix fills in all: 20 distances at their cap, about 6 s of one CPU idle.
MAX_MATRIX_CELLS = 20 * MAX_DISTANCE_CELLS


def all_pairs(n: int) -> list[Pair]:
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def plan(trees: Sequence[Tree], pairs: Sequence[Pair]) -> tuple[list[Pair], list[Pair]]:
    """(the pairs computed exactly, the pairs given their label bound): exact ones cheapest first while their cells
    fit ``MAX_MATRIX_CELLS`` in all (a pair past ``MAX_DISTANCE_CELLS`` alone is bounded either way)."""
    cells = {pair: distance_cells(trees[pair[0]], trees[pair[1]]) for pair in pairs}
    exact, bounded, spent = [], [], 0
    for pair in sorted(pairs, key=lambda p: (cells[p], p)):
        if cells[pair] <= MAX_DISTANCE_CELLS and spent + cells[pair] <= MAX_MATRIX_CELLS:
            exact.append(pair)
            spent += cells[pair]
        else:
            bounded.append(pair)
    return sorted(exact), bounded


def bounded_distances(trees: Sequence[Tree], pairs: Sequence[Pair]) -> list[float]:
    """A lower bound of each pair's normalised distance: ``max(|a|, |b|)`` less the labels the two trees can share
    (counted in hashed buckets, which can only enlarge what they share)."""
    if not pairs:
        return []
    counts = np.stack([label_counts(tree) for tree in trees]).astype(np.int64)
    sizes = np.array([tree.size for tree in trees], dtype=np.int64)
    first, second = np.array(pairs).T
    shared = np.minimum(counts[first], counts[second]).sum(axis=1)
    edits = np.maximum(sizes[first], sizes[second]) - shared
    return [normalise(int(d), int(sizes[i]), int(sizes[j])) for d, i, j in zip(edits, first, second)]


def pair_blocks(n: int, blocks: int, pairs: Sequence[Pair] | None = None) -> list[list[Pair]]:
    """The pairs ``i < j`` of ``n`` items (or the ``pairs`` given) in at most ``blocks`` non-empty blocks of
    near-equal length.

    Pairs are dealt out in turn rather than cut into runs: a population tends to list older (smaller)
    programs first, and runs of consecutive pairs would give one block all the large trees."""
    if blocks < 1:
        raise ValueError(f"blocks must be at least 1, got {blocks}")
    pairs = all_pairs(n) if pairs is None else list(pairs)
    return [pairs[start::blocks] for start in range(min(blocks, len(pairs)))]


def block_distances(trees: Sequence[Tree], pairs: Sequence[Pair]) -> list[float]:
    return [normalised_distance(trees[i], trees[j]) for i, j in pairs]


def assemble(n: int, blocks: Sequence[Sequence[Pair]], results: Sequence[Sequence[float]]) -> np.ndarray:
    """The symmetric n x n matrix with zero diagonal from each block's pairs and distances."""
    matrix = np.zeros((n, n))
    for pairs, distances in zip(blocks, results, strict=True):
        if len(pairs) != len(distances):
            raise ValueError(f"a block of {len(pairs)} pairs came back with {len(distances)} distances")
        for (i, j), distance in zip(pairs, distances):
            matrix[i, j] = matrix[j, i] = distance
    return matrix


def pairwise(trees: Sequence[Tree]) -> np.ndarray:
    exact, bounded = plan(trees, all_pairs(len(trees)))
    return assemble(len(trees), [exact, bounded], [block_distances(trees, exact), bounded_distances(trees, bounded)])
