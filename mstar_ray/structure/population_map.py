"""A population's map: its programs in clusters by structure, k-medoids on the normalised tree-edit-distance
matrix (k chosen by silhouette), and in the plane by classical MDS, as one record the driver stores with the
run (``structure.json``) and the report draws.

The matrix costs n(n-1)/2 tree edit distances: 5,000 for 100 programs, 50 million for 10,000, which no run's end
should wait for (``scripts/bench_scale.py``). Beyond ``MAX_MAPPED`` programs the map is that of a sample:
the best half by static score (where a reader looks) and a seeded draw from the rest (the spread of the
search), so the end of a run costs the same however long it ran."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
from pydantic import BaseModel

from mstar_ray.structure.clusters import choose_k, classical_mds, k_medoids, silhouette
from mstar_ray.structure.index import StructureIndex
from mstar_ray.structure.matrix import pairwise
from mstar_ray.structure.tree import Level, Tree

MAX_CLUSTERS = 6
MAX_MAPPED = 200


class PopulationMap(BaseModel):
    level: Level
    ids: list[str]
    scores: list[float]
    labels: list[int]  # cluster of each program, 0..k-1
    medoids: list[str]  # the program at the centre of each cluster, by cluster
    silhouette: float  # of the chosen clustering; 0 when there is one cluster
    coords: list[tuple[float, float]]  # classical MDS of the distance matrix
    mean_distance: float  # over all pairs: how spread out the population is
    programs: int | None = None  # programs with a tree; more than len(ids) when the map is of a sample


def map_programs(matrix: np.ndarray, ids: list[str], scores: list[float], level: Level, seed: int = 0) -> PopulationMap:
    n = len(ids)
    if matrix.shape != (n, n) or len(scores) != n:
        raise ValueError(f"{n} ids and {len(scores)} scores for a {matrix.shape} matrix")
    k = choose_k(matrix, MAX_CLUSTERS, seed) if n else 1
    medoids, labels = k_medoids(matrix, k, seed) if n else (np.array([], dtype=int), np.array([], dtype=int))
    coords = classical_mds(matrix, 2) if n else np.zeros((0, 2))
    upper = matrix[np.triu_indices(n, 1)]
    return PopulationMap(
        level=level, ids=ids, scores=scores, labels=[int(label) for label in labels],
        medoids=[ids[int(m)] for m in medoids], silhouette=silhouette(matrix, labels) if k > 1 else 0.0,
        coords=[(float(x), float(y)) for x, y in coords], mean_distance=float(upper.mean()) if len(upper) else 0.0,
    )


class Scored(Protocol):
    id: str
    score: float


def map_population(members: Sequence[Scored], index: StructureIndex, seed: int = 0,
                   matrix: Callable[[Sequence[Tree]], np.ndarray] = pairwise) -> PopulationMap | None:
    """The map of the ``members`` the index holds a tree for (a source the parser refused has none and is
    left off the map); ``matrix`` may spread the distances over a Ray cluster."""
    placed = [(m, tree) for m in members if (tree := index.tree(m.id)) is not None]
    if not placed:
        return None
    chosen = [placed[i] for i in mapped([m.score for m, _ in placed], MAX_MAPPED, seed)]
    found = map_programs(matrix([tree for _, tree in chosen]), [m.id for m, _ in chosen],
                         [m.score for m, _ in chosen], index.level, seed=seed)
    return found.model_copy(update={"programs": len(placed)})


def mapped(scores: Sequence[float], limit: int, seed: int) -> list[int]:
    """Which of the programs to map (indices, in population order): all of them up to ``limit``; beyond, the
    best half by score (the earlier on a tie) and a seeded draw of the rest."""
    n = len(scores)
    if n <= limit:
        return list(range(n))
    best = sorted(range(n), key=lambda i: (-scores[i], i))[: limit // 2]
    rest = sorted(set(range(n)) - set(best))
    # the draw's seed string is the one runs have always used, so a report recomputes the same sample
    return sorted(best + random.Random(f"families:{seed}").sample(rest, limit - len(best)))
