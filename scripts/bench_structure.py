"""Time the structural distance matrix of a population against the target: 100 programs of seed size
within 60 s on this machine.

The population is the three seeds and offline mutations of them. Three ways to compute distances, in
one run: the ``apted`` package (the pure-Python reference) on a sample of pairs, since the whole matrix
would take it most of an hour; ``mstar_ray.structure`` in this process, with and without its choice of
decomposition per pair; and ``pairwise_on_ray`` on a local Ray of two CPUs. Times per pair and for the
whole matrix, and the speed-ups measured here; absolute times drift on a shared machine, the ratios are
the figures.

    .venv/bin/python scripts/bench_structure.py [--programs 100] [--reference-pairs 20] [--level exact]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import ray  # noqa: E402
from apted import APTED  # noqa: E402
from apted.helpers import Tree as AptedTree  # noqa: E402

from bench_programs import seeds_and_mutants  # noqa: E402
from mstar_ray.actors.structure_tasks import pairwise_on_ray  # noqa: E402
from mstar_ray.structure.matrix import all_pairs, pairwise  # noqa: E402
from mstar_ray.structure.ted import _zhang_shasha, normalise, tree_distance  # noqa: E402
from mstar_ray.structure.tree import LEVELS, Tree, program_tree, structural_key  # noqa: E402

TARGET_SECONDS = 60.0


def population(count: int) -> list[str]:
    """The seeds and mutations of them, structurally distinct so no pair is trivially equal."""
    return seeds_and_mutants(count, key=structural_key, donors="all")


def to_apted(tree: Tree) -> AptedTree:
    stack: list[tuple[AptedTree, int]] = []
    for label, size in zip(tree.labels.tolist(), tree.sizes.tolist()):
        children, covered = [], 0
        while covered < size - 1:
            child, child_size = stack.pop()
            children.append(child)
            covered += child_size
        stack.append((AptedTree(str(label), *reversed(children)), size))
    return stack[0][0]


def timed(work):
    started = time.perf_counter()
    result = work()
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--programs", type=int, default=100)
    parser.add_argument("--reference-pairs", type=int, default=20)
    parser.add_argument("--level", choices=LEVELS, default="exact")
    args = parser.parse_args()

    sources = population(args.programs)
    trees, build = timed(lambda: [program_tree(source, args.level) for source in sources])
    sizes = np.array([tree.size for tree in trees])
    n_pairs = len(all_pairs(len(trees)))
    print(f"{len(trees)} programs ({args.level} level): tree sizes min {sizes.min()}, mean {sizes.mean():.0f}, "
          f"max {sizes.max()} nodes; {n_pairs} pairs; trees built in {build:.2f} s")

    _, compile_s = timed(lambda: tree_distance(trees[0], trees[1]))
    print(f"first call (numba compile, or load from its cache): {compile_s:.2f} s, not counted below")

    sample = random.Random(1).sample(all_pairs(len(trees)), min(args.reference_pairs, n_pairs))
    expected, reference_s = timed(lambda: [APTED(to_apted(trees[i]), to_apted(trees[j])).compute_edit_distance()
                                           for i, j in sample])
    ours = [tree_distance(trees[i], trees[j]) for i, j in sample]
    if ours != expected:
        raise SystemExit(f"distances differ from apted's on the sample: {ours} vs {expected}")
    reference_pair = reference_s / len(sample)

    left_only, left_s = timed(lambda: [_zhang_shasha(trees[i].labels, trees[i].sizes, trees[j].labels, trees[j].sizes)
                                       for i, j in all_pairs(len(trees))])
    matrix, one_process = timed(lambda: pairwise(trees))
    if [normalise(d, trees[i].size, trees[j].size) for d, (i, j) in zip(left_only, all_pairs(len(trees)))] != \
            [matrix[i, j] for i, j in all_pairs(len(trees))]:
        raise SystemExit("the two decompositions disagree")

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        cold, ray_cold = timed(lambda: pairwise_on_ray(trees))
        warm, ray_warm = timed(lambda: pairwise_on_ray(trees))
    finally:
        ray.shutdown()
    if not (np.array_equal(cold, matrix) and np.array_equal(warm, matrix)):
        raise SystemExit("pairwise_on_ray differs from pairwise")

    per_pair = one_process / n_pairs
    print(f"apted (reference) on {len(sample)} sampled pairs: {reference_pair * 1000:8.1f} ms/pair, same distances; "
          f"whole matrix extrapolated {reference_pair * n_pairs:7.0f} s")
    print(f"plain Zhang-Shasha, left paths only (numba):  {left_s / n_pairs * 1000:8.2f} ms/pair, "
          f"whole matrix {left_s:6.1f} s")
    print(f"mstar_ray.structure, one process:            {per_pair * 1000:8.2f} ms/pair, whole matrix {one_process:6.1f} s")
    print(f"pairwise_on_ray, 2 CPUs, cold (workers start): whole matrix {ray_cold:6.1f} s")
    print(f"pairwise_on_ray, 2 CPUs, warm:                 whole matrix {ray_warm:6.1f} s")
    print(f"speed-up per pair vs apted: {reference_pair / per_pair:.0f}x; cheaper decomposition vs left only: "
          f"{left_s / one_process:.2f}x; Ray (warm) vs one process: {one_process / ray_warm:.2f}x")
    worst = max(one_process, ray_cold)
    verdict = "meets" if worst <= TARGET_SECONDS else "MISSES"
    print(f"target: {len(trees)} programs within {TARGET_SECONDS:.0f} s -> {verdict} it "
          f"(slowest way measured here {worst:.1f} s)")


if __name__ == "__main__":
    main()
