"""One BLAS thread per process, set before numpy is first imported (OpenBLAS reads it once, when loaded).

Every process that computes embeddings (the CLI's ``eval``, the driver choosing the split, Ray workers,
sandboxes) runs numpy matrix products. OpenBLAS starts a thread per core by default, and on a busy machine
those threads wait on each other: ``mstar-ray eval`` on LoCoMo with MiniLM was measured several times slower
in wall and CPU time than with one thread (``scripts/bench_eval_threads.py``). Parallelism comes from
running evaluations side by side, not from threaded BLAS.
"""

from __future__ import annotations

import os

ONE_THREAD: dict[str, str] = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def pin_blas_threads() -> None:
    """Set the BLAS thread variables to 1 in this process (and so in its children) unless the caller set
    them: an explicit choice is kept."""
    for name, value in ONE_THREAD.items():
        os.environ.setdefault(name, value)
