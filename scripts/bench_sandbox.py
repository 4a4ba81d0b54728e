"""Sandbox start-up and call overhead, measured in one run.

Start-to-ready: from asking for a sandbox to its program loaded and its KnowledgeBase constructed,
through the fork server; against a cold start (a new interpreter importing the same libraries, which is
what a plain subprocess per candidate would pay). Round trip: one trivial write+read through the
sandbox against the same calls made in-process. Prints medians, p95 and ratios.

    .venv/bin/python scripts/bench_sandbox.py [--n 50]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.sandbox_host import Sandbox, sandbox_environment, shared_fork_server  # noqa: E402

TRIVIAL = '''
from dataclasses import dataclass
INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""
@dataclass
class KnowledgeItem:
    text: str
@dataclass
class Query:
    text: str
class KnowledgeBase:
    def __init__(self, toolkit):
        self.last = ""
    def write(self, item, raw_text):
        self.last = raw_text
    def read(self, query):
        return self.last
'''


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def fmt(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:8.2f} ms   p95 {pct(values, 0.95) * 1000:8.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=50, help="sandboxes to start")
    parser.add_argument("--cold", type=int, default=5, help="cold interpreter starts to compare with")
    args = parser.parse_args()

    started = time.monotonic()
    server = shared_fork_server()
    print(f"fork server warm-up (once per process): {(time.monotonic() - started) * 1000:.0f} ms")

    ready, round_trips, layers = [], [], []
    for _ in range(args.n):
        with Sandbox(TRIVIAL, fork_server=server) as sandbox:
            t0 = time.perf_counter()
            assert sandbox.start().ok
            ready.append(time.perf_counter() - t0)
            layers = sandbox.layers
            for i in range(20):
                t1 = time.perf_counter()
                assert sandbox.write({"text": "x"}, f"text {i}").ok
                assert sandbox.read({"text": "q"}).ok
                round_trips.append(time.perf_counter() - t1)

    cold = []
    for _ in range(args.cold):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "import chromadb, numpy, sqlite3, sandbox.runner"],
            env=sandbox_environment(), check=True,
        )
        cold.append(time.perf_counter() - t0)

    namespace: dict = {}
    exec(compile(TRIVIAL, "trivial", "exec"), namespace)
    kb = namespace["KnowledgeBase"](None)
    item, query = namespace["KnowledgeItem"]("x"), namespace["Query"]("q")
    direct = []
    for i in range(2000):
        t1 = time.perf_counter()
        kb.write(item, f"text {i}")
        kb.read(query)
        direct.append(time.perf_counter() - t1)

    print(f"layers active: {', '.join(layers)}")
    print(f"start-to-ready, fork server   ({args.n:3d}): {fmt(ready)}")
    print(f"start-to-ready, cold process  ({args.cold:3d}): {fmt(cold)}")
    print(f"  cold / fork-server median ratio: {statistics.median(cold) / statistics.median(ready):.1f}x")
    print(f"write+read round trip, sandbox ({len(round_trips)}): {fmt(round_trips)}")
    print(f"write+read, in-process (unsafe) ({len(direct)}): {fmt(direct)}")
    print(f"  sandbox overhead per write+read: {(statistics.median(round_trips) - statistics.median(direct)) * 1e6:.0f} us")


if __name__ == "__main__":
    main()
