"""Sandbox start-up and call overhead, measured in one run; with ``--compare CHECKOUT``, against another
checkout of the project (its own ``mstar_ray`` and ``sandbox``), interleaved round by round so that a
shared machine's load falls on both alike.

Start-to-ready: from asking for a sandbox to its program loaded and its KnowledgeBase constructed,
through the fork server; against a cold start (a new interpreter importing the same libraries, which is
what a plain subprocess per candidate would pay). Round trip: one trivial write+read through the
sandbox against the same calls made in-process. Prints medians, p95 and ratios.

    .venv/bin/python scripts/bench_sandbox.py [--n 50] [--compare /tmp/main-checkout]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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


def measure(n: int) -> dict:
    """n sandboxes of TRIVIAL through this process's fork server: start-to-ready and 20 write+read each."""
    from mstar_ray.sandbox_host.fork_server import shared_fork_server
    from mstar_ray.sandbox_host.process import Sandbox

    started = time.monotonic()
    server = shared_fork_server(chroma=False)  # the one a run forks every program's process from
    warmup = time.monotonic() - started
    ready, round_trips, layers = [], [], []
    for _ in range(n):
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
    return {"warmup": warmup, "ready": ready, "round_trips": round_trips, "layers": layers}


def measure_checkout(checkout: Path, n: int) -> dict:
    """``measure`` in a fresh interpreter that imports ``checkout``'s code first."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2]); "
            "from bench_sandbox import measure; print(json.dumps(measure(int(sys.argv[3]))))")
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, "-c", code, str(checkout), str(ROOT / "scripts"), str(n)],
                          capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def cold_starts(count: int) -> list[float]:
    from mstar_ray.sandbox_host.fork_server import sandbox_environment

    cold = []
    for _ in range(count):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import chromadb, numpy, sqlite3, sandbox.runner"],
                       env=sandbox_environment(str(ROOT)), check=True)  # a checkout holds sandbox/
        cold.append(time.perf_counter() - t0)
    return cold


def in_process(count: int = 2000) -> list[float]:
    namespace: dict = {}
    exec(compile(TRIVIAL, "trivial", "exec"), namespace)
    kb = namespace["KnowledgeBase"](None)
    item, query = namespace["KnowledgeItem"]("x"), namespace["Query"]("q")
    direct = []
    for i in range(count):
        t1 = time.perf_counter()
        kb.write(item, f"text {i}")
        kb.read(query)
        direct.append(time.perf_counter() - t1)
    return direct


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=50, help="sandboxes to start (per checkout)")
    parser.add_argument("--cold", type=int, default=5, help="cold interpreter starts to compare with")
    parser.add_argument("--compare", type=Path, default=None, help="another checkout to measure in the same run")
    parser.add_argument("--rounds", type=int, default=5, help="with --compare: interleaved rounds")
    args = parser.parse_args()

    if args.compare is None:
        result = measure(args.n)
        print(f"fork server warm-up (once per process): {result['warmup'] * 1000:.0f} ms")
        runs = {"this checkout": result}
    else:
        runs = {"before": {"ready": [], "round_trips": [], "warmup": 0.0}, "after": {"ready": [], "round_trips": [], "warmup": 0.0}}
        per_round = max(1, args.n // args.rounds)
        for _ in range(args.rounds):
            for name, checkout in (("before", args.compare.resolve()), ("after", ROOT)):
                part = measure_checkout(checkout, per_round)
                runs[name]["ready"] += part["ready"]
                runs[name]["round_trips"] += part["round_trips"]
                runs[name]["warmup"] = max(runs[name]["warmup"], part["warmup"])
                runs[name]["layers"] = part["layers"]
    cold = cold_starts(args.cold)
    direct = in_process()

    for name, run in runs.items():
        print(f"[{name}] layers active: {', '.join(run['layers'])}")
    for name, run in runs.items():
        print(f"[{name}] fork server warm-up: {run['warmup'] * 1000:.0f} ms")
        print(f"[{name}] start-to-ready, fork server   ({len(run['ready']):3d}): {fmt(run['ready'])}")
        print(f"[{name}] write+read round trip, sandbox ({len(run['round_trips'])}): {fmt(run['round_trips'])}")
        print(f"[{name}]   sandbox overhead per write+read: "
              f"{(statistics.median(run['round_trips']) - statistics.median(direct)) * 1e6:.0f} us")
        print(f"[{name}]   cold / fork-server median ratio: {statistics.median(cold) / statistics.median(run['ready']):.1f}x")
    print(f"start-to-ready, cold process  ({args.cold:3d}): {fmt(cold)}")
    print(f"write+read, in-process (unsafe) ({len(direct)}): {fmt(direct)}")
    if args.compare is not None:
        before, after = runs["before"], runs["after"]
        print(f"after / before, start-to-ready median: {statistics.median(after['ready']) / statistics.median(before['ready']):.2f}x")
        print(f"after / before, round trip median: "
              f"{statistics.median(after['round_trips']) / statistics.median(before['round_trips']):.2f}x")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
