"""What a reader's fork costs in a process that loaded what each fork server preloads.

A reader is a fork of the candidate's process, and the candidate is a fork of its fork server, so each reader
copies the mappings of everything the fork server imported. Per preload set (nothing; the fork server of
programs' processes, ``sandbox.zygote.PRELOAD``; the one of their Chroma processes, ``CHROMA`` too) a
fresh interpreter imports it and times fork + exit + wait of a child, interleaved over rounds so load on a
shared machine slows all alike. Prints the median per set and its ratio to the Chroma-free fork server's.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/bench_fork_cost.py [--forks 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.sandbox.zygote import CHROMA, PRELOAD  # noqa: E402

SETS = {"bare interpreter": (), "fork server without Chroma": PRELOAD, "fork server with Chroma": (*CHROMA, *PRELOAD)}
CHILD = """
import importlib, json, os, sys, time
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
times = []
for _ in range(int(sys.argv[2])):
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--forks", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in SETS}
    for _ in range(args.rounds):
        for name, modules in SETS.items():
            out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(list(modules)), str(args.forks)],
                                 capture_output=True, text=True, check=True).stdout
            times[name] += json.loads(out)
    lean = statistics.median(times["fork server without Chroma"])
    print(f"fork + exit + wait, median of {args.forks} x {args.rounds}:")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:28} {median * 1000:7.2f} ms  ({median / lean:.2f}x the fork server without Chroma)")


if __name__ == "__main__":
    main()
