"""Normalised tree edit distances between many programs, whole or in blocks.

A population's matrix has n(n-1)/2 independent pairs; ``pair_blocks`` splits them so a caller can
compute the blocks anywhere (``mstar_ray.actors.structure_tasks`` runs them as Ray tasks) and
``assemble`` puts the answers back. ``pairwise`` is the same thing in one process.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mstar_ray.structure.ted import normalised_distance
from mstar_ray.structure.tree import Tree

Pair = tuple[int, int]


def all_pairs(n: int) -> list[Pair]:
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def pair_blocks(n: int, blocks: int) -> list[list[Pair]]:
    """The pairs ``i < j`` of ``n`` items in at most ``blocks`` non-empty blocks of near-equal length.

    Pairs are dealt out in turn rather than cut into runs: a population tends to list older (smaller)
    programs first, and runs of consecutive pairs would give one block all the large trees."""
    if blocks < 1:
        raise ValueError(f"blocks must be at least 1, got {blocks}")
    pairs = all_pairs(n)
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
    pairs = all_pairs(len(trees))
    return assemble(len(trees), [pairs], [block_distances(trees, pairs)])
