"""Throughput of evaluation against the number of evaluations in flight (E), on a simulated cluster.

A fixed workload (candidates x texts x questions) is evaluated by pools of E evaluator actors spread
over a ``ray.cluster_utils.Cluster`` of several nodes; the task agent is an OpenAI-compatible server
that answers after a set latency (the scripted test server), so the work is latency-bound like a run
against a hosted model. Each E gets its own empty cache, so no run helps another. The baseline is a
one-process sequential loop like the reference implementation's (``evaluate`` called in turn, no Ray).
Prints candidates per minute and parallel efficiency (throughput / (E x throughput at E = 1)), measured
in one run; absolute times drift on a shared machine, the ratios are the figures.

Two workloads. ``uniform`` (the default): one seed in as many variants as there are candidates, so every
candidate makes the same calls and efficiency measures the system's own overhead. ``mixed``: seeds and
mutations of them, whose call counts differ; a pool of E then waits on its slowest candidate, so the
table also prints the efficiency a zero-overhead pool would reach with the job times measured at E = 1
(the schedule's bound) and the measured share of it.

    .venv/bin/python scripts/bench_throughput.py [--latency 1.0] [--candidates 32] [--workload uniform|mixed]
        [--evaluators 1 2 4 8 16 32]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from bench_programs import seeds_and_mutants  # noqa: E402
from mstar_ray.actors.evaluator import EvaluatorActor  # noqa: E402
from mstar_ray.actors.run_services import start_run_services  # noqa: E402
from mstar_ray.actors.wiring import RoleClients  # noqa: E402
from mstar_ray.agent.evaluation import evaluate  # noqa: E402
from mstar_ray.llm.endpoint import EndpointConfig  # noqa: E402
from mstar_ray.llm.settings import EmbeddingConfig, LLMSettings  # noqa: E402
from mstar_ray.program_id import program_id  # noqa: E402
from mstar_ray.sandbox_host import SandboxLimits  # noqa: E402
from mstar_ray.search.jobs import EvalJob  # noqa: E402
from mstar_ray.tasks.model import Task  # noqa: E402
from mstar_ray.tasks.registry import load_task  # noqa: E402
from tests.scripted_server import ScriptedServer  # noqa: E402

NODES = 4


def candidates(count: int, workload: str) -> list[str]:
    """Programs, each with its own instruction text: otherwise candidates that share instructions share
    cached extraction replies, and the work would shrink with E = 1 (where later candidates hit what
    earlier ones cached) more than with many in flight. Every request is a miss."""
    if workload == "uniform":
        seed = (ROOT / "seeds" / "vector_search.py").read_text()
        return [_unique(seed, i) for i in range(count)]
    return [_unique(source, i) for i, source in enumerate(seeds_and_mutants(count))]


def _unique(source: str, index: int) -> str:
    for name in ("INSTRUCTION_KNOWLEDGE_ITEM", "INSTRUCTION_QUERY", "INSTRUCTION_RESPONSE"):
        # implicit concatenation keeps the constant a string literal, as the contract requires
        source = re.sub(rf"^{name} = (\(?)", rf'{name} = \1"(variant {index}) " ', source, count=1, flags=re.MULTILINE)
    return source


def settings_for(url: str) -> LLMSettings:
    return LLMSettings(task=EndpointConfig(base_url=url, model="scripted", max_tokens=32),
                       embedding=EmbeddingConfig(kind="hashing"))


def sequential(sources: list[str], url: str, task: Task) -> float:
    """The reference implementation's shape: one process, one candidate after another."""
    roles = RoleClients(settings_for(url))
    backend, embedder = roles.backend(), roles.embedder()
    started = time.monotonic()
    for source in sources:
        evaluate(source, task, backend, embedder)
    return time.monotonic() - started


def pooled(evaluators: int, sources: list[str], url: str, task: Task) -> tuple[float, list[float]]:
    """The wall time of the whole workload, and each job's time from dispatch to result, in job order."""
    settings = settings_for(url)
    with tempfile.TemporaryDirectory() as run_dir:
        cache, gateway = start_run_services(run_dir, settings)
        pool = [EvaluatorActor.options(num_cpus=0.01, resources={"evaluator": 1}, scheduling_strategy="SPREAD")
                .remote(settings, SandboxLimits(), cache.name, gateway.name) for _ in range(evaluators)]
        ray.get([actor.pid.remote() for actor in pool])  # started before the clock runs
        jobs = [EvalJob(candidate_id=program_id(s), source=s, purpose="search", task_name=task.name, texts=task.texts,
                        items=task.items, static_ids=[q.id for q in task.items]) for s in sources]
        started = time.monotonic()
        queue, idle, flights, took = list(enumerate(jobs)), list(pool), {}, [0.0] * len(jobs)
        while queue or flights:
            while idle and queue:
                actor, (index, job) = idle.pop(), queue.pop(0)
                flights[actor.evaluate.remote(job)] = (actor, index, time.monotonic())
            done, _ = ray.wait(list(flights), num_returns=1)
            ray.get(done[0])
            actor, index, dispatched = flights.pop(done[0])
            took[index] = time.monotonic() - dispatched
            idle.append(actor)
        wall = time.monotonic() - started
        for actor in pool:
            ray.kill(actor)
        return wall, took


def schedule_bound(durations: list[float], evaluators: int) -> float:
    """The efficiency of a pool with no overhead at all: jobs of these durations handed in order to the
    first free of ``evaluators`` workers, against perfect division of the total."""
    free_at = [0.0] * evaluators
    for duration in durations:
        slot = free_at.index(min(free_at))
        free_at[slot] += duration
    return sum(durations) / evaluators / max(free_at)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the model server takes per request")
    parser.add_argument("--candidates", type=int, default=32)
    parser.add_argument("--texts", type=int, default=3)
    parser.add_argument("--questions", type=int, default=2)
    parser.add_argument("--workload", choices=["uniform", "mixed"], default="uniform")
    parser.add_argument("--evaluators", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    args = parser.parse_args()
    full = load_task("synthetic", seed=0, granularity="turn")  # the workload the figures in docs/ were measured on
    task = Task(name="bench", texts=full.texts[: args.texts], items=full.items[: args.questions])
    sources = candidates(args.candidates, args.workload)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(NODES - 1):
        cluster.add_node(num_cpus=1, resources={"evaluator": max(args.evaluators)})
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        with ScriptedServer(latency_s=args.latency) as server:
            baseline = sequential(sources, server.base_url, task)
            runs = {e: pooled(e, sources, server.base_url, task) for e in args.evaluators}
    finally:
        ray.shutdown()
        cluster.shutdown()
    per_minute = {e: len(sources) / wall * 60 for e, (wall, _) in runs.items()}
    one = runs.get(1)
    print(f"{len(sources)} {args.workload} candidates x ({args.texts} texts, {args.questions} questions), model "
          f"latency {args.latency * 1000:.0f} ms, simulated cluster of {NODES} nodes on this machine's CPUs")
    print(f"sequential one-process loop (reference shape): {len(sources) / baseline * 60:7.1f} candidates/min")
    print(f"{'E':>4} {'wall s':>8} {'cand/min':>9} {'efficiency':>11} {'bound':>6} {'of bound':>9} {'vs sequential':>14}")
    for e, (wall, _) in runs.items():
        row = f"{e:>4} {wall:8.1f} {per_minute[e]:9.1f}"
        if one:
            efficiency = per_minute[e] / (e * per_minute[1])
            bound = schedule_bound(one[1], e)
            row += f" {efficiency:11.2f} {bound:6.2f} {efficiency / bound:9.2f}"
        else:
            row += f" {'-':>11} {'-':>6} {'-':>9}"
        print(f"{row} {baseline / wall:13.1f}x")


if __name__ == "__main__":
    main()
