"""A population's structural distance matrix spread over the cluster's CPUs as Ray tasks, one block
of pairs per task, assembled by the caller."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import ray

from mstar_ray.structure.matrix import (
    Pair, all_pairs, assemble, block_distances, bounded_distances, pair_blocks, pairwise, plan,
)
from mstar_ray.structure.tree import Tree


# Below this many pairs (a population of about 45) the distances take less time in the driver (about 1.5 ms a
# pair here: scripts/bench_structure.py) than starting the task workers would (a second or two each, cold).
LOCAL_PAIRS = 1000


@ray.remote(num_cpus=1)
def block_task(trees: Sequence[Tree], pairs: Sequence[Pair]) -> list[float]:
    return block_distances(trees, pairs)


def population_matrix(trees: Sequence[Tree]) -> np.ndarray:
    """The matrix where it is quickest: in this process for a small population, else over the cluster."""
    n = len(trees)
    return pairwise(trees) if n * (n - 1) // 2 < LOCAL_PAIRS else pairwise_on_ray(trees)


def pairwise_on_ray(trees: Sequence[Tree], blocks: int | None = None) -> np.ndarray:
    """Same matrix as ``matrix.pairwise``. Blocks default to twice the cluster's CPUs, so a CPU whose
    first block was quick picks up another rather than idling behind a slow one."""
    n = len(trees)
    cpus = int(ray.cluster_resources().get("CPU", 0))
    if cpus < 1:
        return pairwise(trees)  # a cluster with no CPU to lend (workers scaled away) would never run the tasks
    if blocks is None:
        blocks = 2 * cpus
    exact, bounded = plan(trees, all_pairs(n))  # the matrix's total work bounded (matrix.MAX_MATRIX_CELLS)
    split = pair_blocks(n, blocks, exact)
    # stored once: every task reads the same trees rather than each carrying its own copy
    shared: ray.ObjectRef[Sequence[Tree]] = ray.put(list(trees))
    results = ray.get([block_task.remote(shared, pairs) for pairs in split])
    return assemble(n, [*split, bounded], [*results, bounded_distances(trees, bounded)])
