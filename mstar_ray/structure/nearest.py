"""The nearest of many known trees to a new one, exactly, without the distance to every one.

Placing each queued program among all the known ones by brute force costs the run n(n-1)/2 tree edit
distances, a millisecond or more each: a few minutes at a thousand programs, days at ten thousand
(``scripts/bench_scale.py``). Two cheap facts avoid almost all of them, and the answer stays the true minimum:

- trees equal node for node (the same labels and shapes in postorder) are at distance 0: a digest finds them;
- the edit distance is at least ``max(|a|, |b|) - |L(a) & L(b)|``, ``L`` being a tree's multiset of labels: an
  edit script maps some nodes of ``a`` to nodes of ``b`` and deletes or inserts the rest, and a mapped pair
  costs nothing only if its labels agree, which at most ``|L(a) & L(b)|`` pairs can. The multisets are kept as
  label counts hashed into ``BUCKETS`` buckets, one row per known tree, so the bound for all of them is one
  vectorised minimum; merging labels can only enlarge the intersection, so the bound stays a lower bound.

Candidates are visited in increasing order of their bound, each one's exact distance computed, until the next
bound is no smaller than the best distance found: every tree not visited is at least that far. The normalised
distance ``2d / (|a| + |b| + d)`` grows with ``d``, so the bound carries over to it.

The work is bounded whatever the programs' shapes: each distance by ``ted.MAX_DISTANCE_CELLS`` (past it, the
pair's label bound), and each search by its budget of cells (``MAX_NEAREST_CELLS`` unless the caller gives less):
a pair whose cells would take the search past it is not computed, and the answer is that candidate's bound, a
lower bound of the nearest distance.
"""

from __future__ import annotations

import hashlib

import numpy as np

from mstar_ray.structure.ted import MAX_DISTANCE_CELLS, distance_cells, distance_with_cells, normalise
from mstar_ray.structure.tree import Tree

BUCKETS = 256
# The table cells one search may fill (a few pairs at the cap): a newcomer is placed in bounded time however many
# programs are known, its distance past the budget the next candidate's lower bound.
MAX_NEAREST_CELLS = 4 * MAX_DISTANCE_CELLS


def digest(tree: Tree) -> bytes:
    """Equal for trees equal node for node (the labels and subtree sizes in postorder fix the tree)."""
    return hashlib.blake2b(tree.labels.tobytes() + tree.sizes.tobytes(), digest_size=16).digest()


def label_counts(tree: Tree) -> np.ndarray:
    return np.bincount((tree.labels % BUCKETS).astype(np.int64), minlength=BUCKETS).astype(np.int32)


class NearestIndex:
    """Known trees, each distinct tree once, with what the bound needs of them."""

    def __init__(self) -> None:
        self._rows: dict[bytes, int] = {}
        self._trees: list[Tree] = []
        self._sizes = np.zeros(16, dtype=np.int64)
        self._counts = np.zeros((16, BUCKETS), dtype=np.int32)
        self.computed = 0  # exact distances computed by ``nearest`` so far (what the bound did not spare)
        self.cells = 0  # table cells the exact distances filled, in all (the work)
        self.cut_short = 0  # searches that spent ``MAX_NEAREST_CELLS`` and answered with a bound

    def __len__(self) -> int:
        return len(self._trees)

    def add(self, tree: Tree) -> None:
        key = digest(tree)
        if key in self._rows:
            return
        row = len(self._trees)
        if row == len(self._sizes):  # grown by doubling: adding n trees copies O(n) rows in all
            self._sizes = np.concatenate([self._sizes, np.zeros_like(self._sizes)])
            self._counts = np.concatenate([self._counts, np.zeros_like(self._counts)])
        self._rows[key] = row
        self._trees.append(tree)
        self._sizes[row] = tree.size
        self._counts[row] = label_counts(tree)

    def nearest(self, tree: Tree, within: float = float("inf"), budget: int | None = None) -> float | None:
        """The least normalised distance from ``tree`` to a known tree; None when none is known. ``within``: the
        distance to one of the known trees (its parent's), which spares every tree the bound puts beyond it.
        ``budget``: the table cells the search may fill (``MAX_NEAREST_CELLS`` if None), never exceeded."""
        budget = MAX_NEAREST_CELLS if budget is None else budget
        n = len(self._trees)
        if n == 0:
            return None
        if digest(tree) in self._rows:
            return 0.0
        counts = label_counts(tree)
        used = np.flatnonzero(counts)
        shared = np.minimum(self._counts[:n, used], counts[used]).sum(axis=1)
        sizes = self._sizes[:n]
        edits = np.maximum(sizes, tree.size) - shared
        bound = 2.0 * edits / (sizes + tree.size + edits)
        best = within
        spent = 0
        for row in np.argsort(bound, kind="stable"):
            if bound[row] >= best:
                break
            if spent + distance_cells(tree, self._trees[row]) > budget:
                # no tree left is nearer than its bound: the answer is a lower bound
                self.cut_short += 1
                return float(bound[row])
            self.computed += 1
            distance, cells = distance_with_cells(tree, self._trees[row])
            spent += cells
            self.cells += cells
            best = min(best, normalise(distance, tree.size, self._trees[row].size))
        return best
