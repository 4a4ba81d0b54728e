"""Cost of choosing the validation split, measured in one run.

Synthetic L2-normalised 384-d embeddings with cluster structure (10,000 questions, 10,000 texts, like a
large task's validation pool and training experience). Times the static set (k-means, k=60), one
rotating set (k=5) and the training subset (facility location, 60 static questions as targets, budget
120), plus the 10,000 x 10,000 facility-location stress case (budget 100). Then compares the vectorised
greedy with the textbook greedy (a Python loop over candidates at every step, on a precomputed
similarity matrix) on a smaller input, asserts identical picks and prints the speed-up of this run.

    .venv/bin/python scripts/bench_subsets.py [--repeat 3] [--skip-large]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.search.subsets import (  # noqa: E402
    facility_location,
    representative_set,
    rotating_set,
    training_budget,
)

DIM = 384


def clustered_embeddings(n: int, *, clusters: int, spread: float, seed: int) -> np.ndarray:
    """Unit vectors scattered around random topic directions, so k-means and coverage have structure
    to find, as sentence embeddings of questions about a few hundred topics do."""
    rng = np.random.default_rng(seed)
    topics = rng.standard_normal((clusters, DIM))
    topics /= np.linalg.norm(topics, axis=1, keepdims=True)
    x = topics[rng.integers(clusters, size=n)] + spread * rng.standard_normal((n, DIM)) / np.sqrt(DIM)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def timed(call: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    """Result of the last call and the median wall time over `repeat` calls."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return result, statistics.median(times)


def textbook_greedy(targets: np.ndarray, candidates: np.ndarray, budget: int) -> list[int]:
    """Reference: each step loops over every unchosen candidate in Python and keeps the strictly best
    gain (so ties keep the lower index); the similarity matrix is computed once, as a fair baseline."""
    sim = np.maximum(targets @ candidates.T, 0.0)
    best = np.zeros(targets.shape[0])
    chosen: list[int] = []
    taken = set()
    for _ in range(min(budget, candidates.shape[0])):
        pick, pick_gain = -1, -1.0
        for j in range(candidates.shape[0]):
            if j in taken:
                continue
            gain = float(np.maximum(sim[:, j] - best, 0.0).sum())
            if gain > pick_gain:
                pick, pick_gain = j, gain
        chosen.append(pick)
        taken.add(pick)
        best = np.maximum(best, sim[:, pick])
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing (median is printed)")
    parser.add_argument("--skip-large", action="store_true", help="skip the 10,000 x 10,000 case")
    args = parser.parse_args()

    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}, numpy {np.__version__}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    questions = clustered_embeddings(10_000, clusters=200, spread=0.8, seed=1)
    texts = clustered_embeddings(10_000, clusters=200, spread=0.8, seed=2)
    print(f"data: {len(questions)} questions, {len(texts)} texts, {DIM}-d, 200 topics\n")

    static, seconds = timed(lambda: representative_set(questions, 60, seed=0), args.repeat)
    print(f"static set      k-means k=60 on 10,000 questions           {seconds * 1000:9.1f} ms")

    rotating, seconds = timed(
        lambda: rotating_set(questions, 5, exclude=static, iteration=1, seed=0), args.repeat
    )
    print(f"rotating set    k=5 on the 9,940 remaining questions       {seconds * 1000:9.1f} ms")

    budget = training_budget(len(static), 2.0)
    train, seconds = timed(lambda: facility_location(questions[static], texts, budget), args.repeat)
    print(f"training set    facility location 60 x 10,000, budget {budget}  {seconds * 1000:9.1f} ms")

    if not args.skip_large:
        _, seconds = timed(lambda: facility_location(questions, texts, 100), 1)
        print(f"stress          facility location 10,000 x 10,000, budget 100 {seconds:7.2f} s")

    targets, candidates = questions[static], texts[:2_000]
    reference, naive_seconds = timed(lambda: textbook_greedy(targets, candidates, 20), 1)
    picks, fast_seconds = timed(lambda: facility_location(targets, candidates, 20), args.repeat)
    if picks != reference:
        raise SystemExit(f"picks differ from the textbook greedy: {picks} vs {reference}")
    print("\ngreedy on 60 targets x 2,000 candidates, budget 20 (identical picks):")
    print(f"  textbook (Python loop over candidates)  {naive_seconds * 1000:9.1f} ms")
    print(f"  vectorised (incremental gains)          {fast_seconds * 1000:9.1f} ms")
    print(f"  speed-up                                {naive_seconds / fast_seconds:9.1f} x")


if __name__ == "__main__":
    main()
