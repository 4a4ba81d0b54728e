"""A population's structural distance matrix spread over the cluster's CPUs as Ray tasks, one block
of pairs per task, assembled by the caller."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import ray

from mstar_ray.structure.matrix import Pair, assemble, block_distances, pair_blocks, pairwise
from mstar_ray.structure.tree import Tree


@ray.remote(num_cpus=1)
def block_task(trees: Sequence[Tree], pairs: Sequence[Pair]) -> list[float]:
    return block_distances(trees, pairs)


def pairwise_on_ray(trees: Sequence[Tree], blocks: int | None = None) -> np.ndarray:
    """Same matrix as ``matrix.pairwise``. Blocks default to twice the cluster's CPUs, so a CPU whose
    first block was quick picks up another rather than idling behind a slow one."""
    n = len(trees)
    cpus = int(ray.cluster_resources().get("CPU", 0))
    if cpus < 1:
        return pairwise(trees)  # a cluster with no CPU to lend (workers scaled away) would never run the tasks
    if blocks is None:
        blocks = 2 * cpus
    split = pair_blocks(n, blocks)
    # stored once: every task reads the same trees rather than each carrying its own copy
    shared = ray.put(list(trees))
    results = ray.get([block_task.remote(shared, pairs) for pairs in split])
    return assemble(n, split, results)
