"""What the search knows about the structure of the programs it has queued: one structural key each, for
deduplication, and one tree each (at the run's abstraction level), for the novelty of a newcomer and the
population's clusters at the end.

Sources are parsed here, never run. A program whose tree cannot be built (a parser limit) gets no key
and no novelty; it is still evaluated, and its sandbox decides what it is worth.

Placing a program runs in the driver's loop, so its work is bounded by construction, whatever the program's shape:
the parse and the key are linear in a tree the checker's caps bound (``MAX_TREE_NODES``, ``MAX_TREE_DEPTH``), the
label bounds of all known trees are one vectorised pass, and the tree edit distances (to the parent, then to the
nearest known programs) fill at most ``MAX_PLACE_CELLS`` table cells in all, about a second idle and a few on a busy
machine (``scripts/bench_host_bounds.py``); past it a distance is its label lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from mstar_ray.structure.nearest import NearestIndex
from mstar_ray.structure.ted import MAX_DISTANCE_CELLS, distance_with_cells, normalise
from mstar_ray.structure.tree import Level, Tree, program_tree, structural_key

# Four distances at their cap: the parent's, then the nearest within what is left. One was too few for programs a
# search really makes (mutated seeds: the nearest search ran out at 8.5e7 cells and answered a lower bound).
MAX_PLACE_CELLS = 4 * MAX_DISTANCE_CELLS


@dataclass(frozen=True)
class Placement:
    """Where a new program stands among the known ones."""

    key: str | None
    duplicate_of: str | None  # the first known program with the same key
    to_parent: float | None  # normalised tree edit distance to its parent
    to_population: float | None  # to the nearest known program
    tree: Tree | None = None
    cells: int = 0  # the table cells its distances filled (at most MAX_PLACE_CELLS)


class StructureIndex:
    def __init__(self, level: Level = "names"):
        self.level = level
        self._first_by_key: dict[str, str] = {}
        self._trees: dict[str, Tree] = {}
        self._nearest = NearestIndex()  # the known trees, for the nearest one to a newcomer

    def __len__(self) -> int:
        return len(self._trees)

    def place(self, source: str, parent: str | None) -> Placement:
        """The program's key, the program it repeats (if any) and its novelty, against what is known
        now; it is not added (``add`` does that once it is queued)."""
        read = self._read(source)
        if read is None:
            return Placement(None, None, None, None)
        key, tree = read
        to_parent, cells = None, 0
        if parent in self._trees:
            distance, cells = distance_with_cells(tree, self._trees[parent])
            to_parent = normalise(distance, tree.size, self._trees[parent].size)
        before = self._nearest.cells
        to_population = self._nearest.nearest(tree, within=float("inf") if to_parent is None else to_parent,
                                               budget=MAX_PLACE_CELLS - cells)
        cells += self._nearest.cells - before
        return Placement(key, self._first_by_key.get(key), to_parent, to_population, tree, cells)

    def learn(self, program_id: str, source: str) -> None:
        """Know a program without placing it (a resume, or a report, re-reading a population)."""
        read = self._read(source)
        if read is not None:
            self.add(program_id, Placement(read[0], None, None, None, read[1]))

    def add(self, program_id: str, placement: Placement) -> None:
        if placement.key is None or placement.tree is None:
            return
        self._first_by_key.setdefault(placement.key, program_id)
        if program_id not in self._trees:
            self._trees[program_id] = placement.tree
            self._nearest.add(placement.tree)

    def tree(self, program_id: str) -> Tree | None:
        return self._trees.get(program_id)

    def _read(self, source: str) -> tuple[str, Tree] | None:
        try:
            return structural_key(source), program_tree(source, self.level)
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            return None
