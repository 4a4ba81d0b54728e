"""Exact tree edit distance with unit costs (insert, delete, rename = 1): the quantity APTED computes.

The algorithm is Zhang and Shasha's (1989) dynamic programme over keyroot pairs, with two choices that
make it fast enough to fill a population's distance matrix:

- its hot loop is compiled with numba. In pure Python (the ``apted`` package) a pair of seed-size
  programs (~230 nodes here) takes over half a second, and a population of 100 has 4,950 pairs;
- each pair is decomposed along left paths or right paths, whichever costs fewer table cells for that
  pair. Zhang-Shasha on the mirrored trees (every node's children reversed) computes the same distance,
  and syntax trees are lopsided (a node's first children tend to be small, a function's arguments or an
  ``if``'s test, and its last ones large, the body), so the cheaper orientation, usually right paths,
  halves the work on a population of seeds and mutants (measured: 1.9x). This is the two-strategy
  special case of what APTED chooses per subtree; its full strategy could save more on large trees,
  at several times the code.

``tree_distance`` of two seed-size programs takes one to two milliseconds, some 400 times less than
``apted``'s on the same trees, and programs three times that size about ten times longer (the cost grows
with the product of the two trees' keyroot subtree sizes); ``scripts/bench_structure.py`` measures it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numba
import numpy as np

from mstar_ray.structure.tree import Tree


def _on_disk_cache() -> bool:
    """Whether numba keeps the compiled loops on disk, and where: in ``NUMBA_CACHE_DIR`` if set, else in the
    user's cache folder (``~/.cache/mstar-ray/numba``), never beside this file: this file may be anywhere (a
    read-only install, a Ray job's copy of the checkout, which Ray may unpack again under a running job). With
    no usable folder (no home, a read-only one) the loops are compiled in each process instead, a second or two."""
    config: Any = numba.config  # numba sets its options on this module at import time, unseen by mypy
    if not config.CACHE_DIR:
        try:
            base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        except RuntimeError:  # no home directory
            return False
        config.CACHE_DIR = str(base / "mstar-ray" / "numba")
    try:
        Path(config.CACHE_DIR).mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(config.CACHE_DIR, os.W_OK | os.X_OK)


_CACHE = _on_disk_cache()


# The most table cells one exact distance may fill. Zhang-Shasha fills the product of the two trees' keyroot cells
# (in the cheaper orientation): the largest pair of library seeds 2.7e7 (about 0.1 s), while two trees shaped
# against both orientations within the checker's caps (8,000 nodes, 50 deep) fill some 1e10, minutes of a host
# process. Past the cap a pair's distance is its label lower bound (``label_bound``), linear in the trees' sizes:
# a candidate's shape cannot buy host time, and novelty reads a lower bound for such a pair.
MAX_DISTANCE_CELLS = 100_000_000


def tree_distance(a: Tree, b: Tree) -> int:
    """The least number of node insertions, deletions and renames that turn ``a`` into ``b`` (its lower bound
    ``label_bound`` past ``MAX_DISTANCE_CELLS``)."""
    return distance_with_cells(a, b)[0]


def distance_with_cells(a: Tree, b: Tree) -> tuple[int, int]:
    """The distance and the table cells filled to find it (0: the pair was past the cap, and the bound stands)."""
    cells = distance_cells(a, b)
    if cells > MAX_DISTANCE_CELLS:
        return label_bound(a, b), 0
    return int(_distance(a.labels, a.sizes, a.mirror_labels, a.mirror_sizes,
                         b.labels, b.sizes, b.mirror_labels, b.mirror_sizes)), cells


def distance_cells(a: Tree, b: Tree) -> int:
    """The cells the exact distance of the pair fills: computed in time linear in the trees' sizes."""
    return int(min(_keyroot_cells(a.sizes) * _keyroot_cells(b.sizes),
                   _keyroot_cells(a.mirror_sizes) * _keyroot_cells(b.mirror_sizes)))


def label_bound(a: Tree, b: Tree) -> int:
    """``max(|a|, |b|) - |L(a) & L(b)|``, ``L`` a tree's multiset of labels: no edit script is shorter (each
    mapped pair with equal labels is one of the shared labels, and every other node costs an edit)."""
    values_a, counts_a = np.unique(a.labels, return_counts=True)
    values_b, counts_b = np.unique(b.labels, return_counts=True)
    _, in_a, in_b = np.intersect1d(values_a, values_b, assume_unique=True, return_indices=True)
    shared = int(np.minimum(counts_a[in_a], counts_b[in_b]).sum())
    return max(a.size, b.size) - shared


def normalised_distance(a: Tree, b: Tree) -> float:
    """``2d / (|a| + |b| + d)``, in [0, 1]: 0 only for equal trees, and below 1 for any two trees
    (renaming root to root is always cheaper than deleting and inserting everything).

    Deleting all of ``a`` and inserting all of ``b`` is always an edit script, so ``d <= |a| + |b|``,
    which bounds this by 1. Unlike ``d / (|a| + |b|)`` or ``d / max(|a|, |b|)`` (the latter is not even
    bounded: a path and a star of n nodes are nearly 2n apart), this normalisation keeps the triangle
    inequality (Li and Zhang, "A metric normalization of tree edit distance", 2011), which the medoid
    clustering and the distance map built on it rely on to be meaningful.
    """
    return normalise(tree_distance(a, b), a.size, b.size)


def normalise(distance: int, size_a: int, size_b: int) -> float:
    total = size_a + size_b + distance
    return 2.0 * distance / total if total else 0.0


@numba.njit(cache=_CACHE)
def _keyroot_cells(sizes: np.ndarray) -> int:
    """Cells Zhang-Shasha fills on this tree's side: the sum over keyroots of subtree size + 1."""
    n = sizes.shape[0]
    seen = np.zeros(n, dtype=np.bool_)
    cells = 0
    for i in range(n - 1, -1, -1):
        leftmost = i - sizes[i] + 1
        if not seen[leftmost]:
            seen[leftmost] = True
            cells += sizes[i] + 1
    return cells


@numba.njit(cache=_CACHE)
def _keyroots(sizes: np.ndarray) -> np.ndarray:
    """Nodes with no ancestor sharing their leftmost leaf (the root and every non-first child), in
    increasing postorder so each keyroot's subproblems are solved before it needs them."""
    n = sizes.shape[0]
    seen = np.zeros(n, dtype=np.bool_)
    chosen = np.zeros(n, dtype=np.bool_)
    for i in range(n - 1, -1, -1):
        leftmost = i - sizes[i] + 1
        if not seen[leftmost]:
            seen[leftmost] = True
            chosen[i] = True
    return np.nonzero(chosen)[0]


@numba.njit(cache=_CACHE)
def _zhang_shasha(labels_a: np.ndarray, sizes_a: np.ndarray, labels_b: np.ndarray, sizes_b: np.ndarray) -> int:
    n_a, n_b = labels_a.shape[0], labels_b.shape[0]
    leftmost_a = np.arange(n_a) - sizes_a + 1
    leftmost_b = np.arange(n_b) - sizes_b + 1
    tree = np.zeros((n_a, n_b), dtype=np.int32)  # distances between subtrees, filled keyroot by keyroot
    forest = np.empty((n_a + 1, n_b + 1), dtype=np.int32)
    for ka in _keyroots(sizes_a):
        la = leftmost_a[ka]
        rows = ka - la + 2
        for kb in _keyroots(sizes_b):
            lb = leftmost_b[kb]
            cols = kb - lb + 2
            # forest[x, y]: distance between the forests of the first x-1 nodes of ka's subtree (in
            # postorder, from la) and the first y-1 of kb's; row and column 0 are the empty forest.
            for y in range(cols):
                forest[0, y] = y
            for x in range(1, rows):
                a = la + x - 1
                forest[x, 0] = x
                whole_a = leftmost_a[a] == la
                pa = leftmost_a[a] - la
                for y in range(1, cols):
                    b = lb + y - 1
                    best = min(forest[x - 1, y], forest[x, y - 1]) + 1
                    if whole_a and leftmost_b[b] == lb:
                        # both prefixes are whole trees: match their roots
                        best = min(best, forest[x - 1, y - 1] + (labels_a[a] != labels_b[b]))
                        tree[a, b] = best
                    else:
                        # match the last subtrees whole, at the cost found when they were keyroot pairs
                        best = min(best, forest[pa, leftmost_b[b] - lb] + tree[a, b])
                    forest[x, y] = best
    return tree[n_a - 1, n_b - 1]  # type: ignore[no-any-return]  # numpy types an element read as Any


@numba.njit(cache=_CACHE)
def _distance(labels_a: np.ndarray, sizes_a: np.ndarray, mirror_labels_a: np.ndarray, mirror_sizes_a: np.ndarray,
              labels_b: np.ndarray, sizes_b: np.ndarray, mirror_labels_b: np.ndarray, mirror_sizes_b: np.ndarray) -> int:
    left = _keyroot_cells(sizes_a) * _keyroot_cells(sizes_b)
    right = _keyroot_cells(mirror_sizes_a) * _keyroot_cells(mirror_sizes_b)
    if right < left:
        return _zhang_shasha(mirror_labels_a, mirror_sizes_a, mirror_labels_b, mirror_sizes_b)
    return _zhang_shasha(labels_a, sizes_a, labels_b, sizes_b)
