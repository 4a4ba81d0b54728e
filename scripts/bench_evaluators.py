"""Wall time of evaluating the same candidates with E = 1 and E = 4 evaluator actors on a local Ray.

The task agent is an OpenAI-compatible server that answers after a set latency (the scripted test
server), so the work is latency-bound like a real run against a hosted model; each E gets its own
empty cache so neither run is helped by the other. Prints both wall times and their ratio, measured in
one run (absolute times drift on a shared machine; the ratio is the figure).

    .venv/bin/python scripts/bench_evaluators.py [--latency 0.05] [--candidates 8]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ray  # noqa: E402

from mstar_ray.actors.evaluator import EvaluatorActor  # noqa: E402
from mstar_ray.actors.run_services import start_run_services  # noqa: E402
from mstar_ray.llm.endpoint import EndpointConfig  # noqa: E402
from mstar_ray.llm.settings import EmbeddingConfig, LLMSettings  # noqa: E402
from mstar_ray.program_id import program_id  # noqa: E402
from mstar_ray.reflect.mutations import NoMutation, propose  # noqa: E402
from mstar_ray.sandbox_host import SandboxLimits  # noqa: E402
from mstar_ray.search.jobs import EvalJob  # noqa: E402
from mstar_ray.tasks.registry import load_task  # noqa: E402
from tests.scripted_server import ScriptedServer  # noqa: E402


def candidates(count: int) -> list[str]:
    seeds = [(ROOT / "seeds" / f"{name}.py").read_text() for name in ("vector_search", "llm_summarizer", "experience_learner")]
    programs = {program_id(s): s for s in seeds}
    rng = random.Random(0)
    while len(programs) < count:
        try:
            child = propose(rng.choice(seeds), seeds, rng).source
        except NoMutation:
            continue
        programs.setdefault(program_id(child), child)
    return list(programs.values())[:count]


def run(evaluators: int, sources: list[str], url: str, texts, questions) -> float:
    settings = LLMSettings(task=EndpointConfig(base_url=url, model="scripted", max_tokens=32),
                           embedding=EmbeddingConfig(kind="hashing"))
    with tempfile.TemporaryDirectory() as run_dir:
        cache, gateway = start_run_services(run_dir, settings)
        pool = [EvaluatorActor.options(num_cpus=0.25).remote(settings, SandboxLimits(), cache, gateway)
                for _ in range(evaluators)]
        ray.get([actor.pid.remote() for actor in pool])  # started before the clock runs
        jobs = [EvalJob(candidate_id=program_id(s), source=s, purpose="search", task_name="bench", texts=texts,
                        questions=questions, static_ids=[q.id for q in questions]) for s in sources]
        started = time.monotonic()
        idle, flights = list(pool), {}
        while jobs or flights:
            while idle and jobs:
                actor = idle.pop()
                flights[actor.evaluate.remote(jobs.pop())] = actor
            done, _ = ray.wait(list(flights), num_returns=1)
            ray.get(done[0])
            idle.append(flights.pop(done[0]))
        wall = time.monotonic() - started
        for actor in pool:
            ray.kill(actor)
        return wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the model server takes per request")
    parser.add_argument("--candidates", type=int, default=8)
    args = parser.parse_args()
    task = load_task("synthetic", seed=0)
    texts, questions = task.texts[:12], task.questions[:6]
    sources = candidates(args.candidates)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with ScriptedServer(latency_s=args.latency) as server:
            walls = {e: run(e, sources, server.base_url, texts, questions) for e in (1, 4)}
            requests = server.requests
    finally:
        ray.shutdown()
    print(f"{len(sources)} candidates x ({len(texts)} texts, {len(questions)} questions), model latency "
          f"{args.latency * 1000:.0f} ms, {requests} model requests in all, 2 CPUs")
    for e, wall in walls.items():
        print(f"  E = {e}: {wall:6.1f} s")
    print(f"  speed-up E=4 vs E=1: {walls[1] / walls[4]:.2f}x (wall-time ratio E=4/E=1: {walls[4] / walls[1]:.2f})")


if __name__ == "__main__":
    main()
