"""Wall and CPU time of one ``mstar-ray eval`` with BLAS on one thread (the default) and on every core.

    .venv/bin/python scripts/bench_eval_threads.py [--rounds 1] [-- EVAL ARGS ...]

The default evaluation is ``seeds/vector_search.py --task locomo --conversation 0 --limit 10`` with the
MiniLM embedder, whose matrix products run in the CLI process (the questions and texts it embeds). Every
``mstar_ray`` process sets ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` to 1 unless the
caller set them (``mstar_ray/blas.py``); the other variant sets them to this machine's core count, which is
what OpenBLAS does when nothing is set. The two variants alternate within each round, so both see the same
load; the ratios (all cores / one thread) are the figures to compare. CPU time counts the eval process and
every process it waited for (its sandboxes).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EVAL = ["seeds/vector_search.py", "--task", "locomo", "--conversation", "0", "--limit", "10"]
BLAS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def measure(eval_args: list[str], threads: int | None) -> tuple[float, float]:
    """(wall s, CPU s) of one eval; ``threads`` None leaves the BLAS variables unset."""
    env = {k: v for k, v in os.environ.items() if k not in BLAS}
    if threads is not None:
        env.update({name: str(threads) for name in BLAS})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mstar_ray.cli", "eval", *eval_args], cwd=ROOT, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        sys.exit(f"mstar-ray eval exited {done.returncode}:\n{done.stderr[-2000:]}")
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("eval_args", nargs="*", help="after --: the eval's arguments")
    args = parser.parse_args()
    eval_args = args.eval_args or DEFAULT_EVAL
    cores = os.cpu_count() or 1
    print(f"mstar-ray eval {' '.join(eval_args)}; {cores} cores; load average {os.getloadavg()[0]:.1f}")
    totals = {"default": [0.0, 0.0], "all cores": [0.0, 0.0]}
    for round_ in range(args.rounds):
        for name, threads in (("all cores", cores), ("default", None)) if round_ % 2 else (
                ("default", None), ("all cores", cores)):
            wall, cpu = measure(eval_args, threads)
            totals[name][0] += wall
            totals[name][1] += cpu
            print(f"round {round_ + 1}, {name:9} (BLAS threads {threads or 'unset'}): wall {wall:6.1f} s, CPU {cpu:6.1f} s",
                  flush=True)
    (wall_d, cpu_d), (wall_a, cpu_a) = totals["default"], totals["all cores"]
    print(f"all cores / default: wall {wall_a / wall_d:.2f}x, CPU {cpu_a / cpu_d:.2f}x")


if __name__ == "__main__":
    main()
