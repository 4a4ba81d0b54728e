"""Throughput of the numpy all-MiniLM-L6-v2 embedder at batch sizes 1, 8 and 32, with peak memory.

    .venv/bin/python scripts/bench_embedding.py [--n 500] [--rounds 3]

Sentences of 10-30 words are made from a fixed vocabulary with a fixed seed. The batch sizes are measured
in interleaved rounds and each keeps its best round, because on a shared 2-core machine any other process
slows whichever size happens to run at that moment; the ratios to batch size 1 are the figures to compare.
OpenBLAS runs the matrix products on every core by default; when another process keeps a core busy its
threads wait on each other and throughput can fall tenfold, so compare runs with ``OPENBLAS_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import time

from mstar_ray.embedding.minilm import MiniLMEmbedder

VOCABULARY = (
    "alice bob caroline melanie went to the market yesterday and bought fresh bread apples cheese while "
    "talking about her new job at the hospital where she works nights caring for patients after surgery "
    "they planned a trip to paris next summer because his sister lives there with two cats and a garden "
    "painting pottery camping lake mountains support group adoption counselling school friends birthday"
).split()
BATCH_SIZES = (1, 8, 32)


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(VOCABULARY, k=rng.randint(10, 30))).capitalize() + "." for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500, help="sentences per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best one counts")
    args = parser.parse_args()
    texts = sentences(args.n)
    threads = {v: os.environ[v] for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS") if v in os.environ}
    print(f"{len(texts)} sentences, BLAS threads: {threads or 'default (all cores)'}")
    embedder = MiniLMEmbedder()
    started = time.perf_counter()
    embedder.embed(["load the weights"])
    print(f"first call (load + 1 sentence): {time.perf_counter() - started:.2f} s")
    best = {size: float("inf") for size in BATCH_SIZES}
    for _ in range(args.rounds):
        for size in BATCH_SIZES:
            # One instance for every size: separate ones would each map the weights and inflate peak RSS.
            embedder.batch_size = size
            started = time.perf_counter()
            embedder.embed_array(texts)
            best[size] = min(best[size], time.perf_counter() - started)
    for size in BATCH_SIZES:
        rate = len(texts) / best[size]
        print(f"batch_size {size:>2}: {rate:7.1f} sentences/s  ({best[1] / best[size]:.2f}x batch size 1)")
    # ru_maxrss is in KiB on Linux.
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
