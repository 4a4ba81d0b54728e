"""Timings of the interactive (episode) family, and how evaluation throughput scales with E on it.

An environment step is not an LLM call: it is a round trip to the helper process hosting the engine (a JVM for
TextWorldExpress), which keeps a core busy while it answers. So the first part times the pieces in one process,
without Ray: loading the task (the expert playing every game), the engine's start, one environment step, one
episode and one whole evaluation (``evaluate`` of a seed with the offline task agent). The second part evaluates
the same workload (``--candidates`` variants of a seed, each writing the task's texts and playing ``--episodes``
games) with pools of E evaluator actors on a local Ray, each actor asking for one CPU as in a run; each actor
first plays one game so that its engine's start is not timed. ``--latency S`` puts every task-agent call behind a
scripted server answering after S seconds (the actor's replies then match no action and it explores), which
makes the work wait on a model as a real run does. Ratios are measured in one run: absolute times drift on a
shared machine.

    .venv/bin/python scripts/bench_episodes.py [--task twc] [--episodes 20] [--candidates 8] [--evaluators 1 2]
        [--latency 0]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ray  # noqa: E402

from mstar_ray.actors.evaluator_actor import EvaluatorActor  # noqa: E402
from mstar_ray.actors.run_services import start_run_services  # noqa: E402
from mstar_ray.actors.wiring import RoleClients  # noqa: E402
from mstar_ray.agent.evaluation import evaluate  # noqa: E402
from mstar_ray.envs.base import EpisodeSpec  # noqa: E402
from mstar_ray.envs.env_process import EnvProcess  # noqa: E402
from mstar_ray.llm.endpoint import EndpointConfig  # noqa: E402
from mstar_ray.llm.settings import EmbeddingConfig, LLMSettings  # noqa: E402
from mstar_ray.program_id import program_id  # noqa: E402
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits  # noqa: E402
from mstar_ray.search.jobs import EvalJob  # noqa: E402
from mstar_ray.tasks.model import Task  # noqa: E402
from mstar_ray.families.task_registry import load_task  # noqa: E402
from tests.scripted_server import ScriptedServer  # noqa: E402

SEED = ROOT / "seeds" / "experience_learner.py"


def variants(count: int) -> list[str]:
    """Programs that differ in their instructions only: distinct ids and the same work. Every instruction is
    marked, since each enters a different call (extraction, query, every action): a variant sharing one with
    another would have those calls answered by the run's cache, or wait on the other's identical call."""
    source = SEED.read_text()
    out = []
    for index in range(count):
        marked = source
        for name in ("INSTRUCTION_KNOWLEDGE_ITEM", "INSTRUCTION_QUERY", "INSTRUCTION_RESPONSE"):
            marked = re.sub(rf"^{name} = \(?", lambda m: f'{m.group(0)}"(variant {index}) " ', marked, count=1,
                            flags=re.MULTILINE)
        out.append(marked)
    return out


def settings(url: str | None) -> LLMSettings:
    task = EndpointConfig(base_url=url, model="scripted", max_tokens=32, timeout_s=60) if url else None
    return LLMSettings(task=task, embedding=EmbeddingConfig(kind="hashing"))


def pieces(task: Task, episodes: int, url: str | None) -> Task:
    """Times in one process: the engine's start, a step, an episode and an evaluation. Returns the workload."""
    spec = EpisodeSpec.model_validate(task.items[0].spec)
    with EnvProcess(spec.game.env) as env:
        started = time.monotonic()
        first = env.reset(spec.game, spec.step_timeout_s)
        start_s = time.monotonic() - started
        steps = []
        for _ in range(50):
            started = time.monotonic()
            env.step(first.actions[0], spec.step_timeout_s)
            steps.append(time.monotonic() - started)
    workload = task.model_copy(update={"items": task.items[:episodes]})
    roles = RoleClients(settings(url))
    report = evaluate(SEED.read_text(), workload, roles.backend(), roles.embedder())
    per_episode = [r.seconds for r in report.results]
    actions = sum(r.trace.count("\nACTION: ") for r in report.results)
    print(f"engine start (process + JVM + first reset): {start_s:.2f} s; one environment step: median "
          f"{statistics.median(steps) * 1000:.1f} ms (round trip to the helper process)")
    print(f"one evaluation of {SEED.stem}: {report.wall_seconds:.1f} s for {report.texts_written} texts and "
          f"{len(per_episode)} episodes ({actions} actions, success {report.score:.2f})")
    print(f"per episode: mean {statistics.mean(per_episode):.2f} s, median {statistics.median(per_episode):.2f} s, "
          f"max {max(per_episode):.2f} s; per action {sum(per_episode) / max(actions, 1) * 1000:.0f} ms "
          f"(the actor step, the environment step, and the episode's one read)")
    return workload


def pooled(evaluators: int, sources: list[str], task: Task, url: str | None) -> float:
    config = settings(url)
    with tempfile.TemporaryDirectory() as run_dir:
        cache, gateway = start_run_services(run_dir, config)
        pool = [EvaluatorActor.options(num_cpus=1).remote(config, SandboxLimits(), cache.name, gateway.name)
                for _ in range(evaluators)]
        warm = task.model_copy(update={"items": task.items[:1], "texts": task.texts[:1]})
        ray.get([actor.evaluate.remote(_job(f"warm-{i}", SEED.read_text(), warm)) for i, actor in enumerate(pool)])
        jobs = [_job(program_id(source), source, task) for source in sources]
        started = time.monotonic()
        idle, flights = list(pool), {}
        while jobs or flights:
            while idle and jobs:
                actor = idle.pop()
                flights[actor.evaluate.remote(jobs.pop(0))] = actor
            done, _ = ray.wait(list(flights), num_returns=1)
            ray.get(done[0])
            idle.append(flights.pop(done[0]))
        wall = time.monotonic() - started
        for actor in pool:
            ray.kill(actor)
        return wall


def _job(candidate_id: str, source: str, task: Task) -> EvalJob:
    return EvalJob(candidate_id=candidate_id, source=source, purpose="search", task_name=task.name, family=task.family,
                   texts=task.texts, items=task.items, static_ids=[item.id for item in task.items])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="twc", choices=["twc", "cookingworld", "coin"])
    parser.add_argument("--episodes", type=int, default=20, help="games each evaluation plays")
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--evaluators", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds a scripted model takes per call (0: offline)")
    args = parser.parse_args()
    started = time.monotonic()
    task = load_task(args.task)
    print(f"task {args.task}: {len(task.texts)} expert transcripts and {len(task.items)} episodes loaded in "
          f"{time.monotonic() - started:.1f} s (every game played by its expert once)")
    with ScriptedServer(latency_s=args.latency, reply="look around") as server:
        url = server.base_url if args.latency > 0 else None
        workload = pieces(task, args.episodes, url)
        sources = variants(args.candidates)
        ray.init(num_cpus=max(args.evaluators), include_dashboard=False, log_to_driver=False)
        try:
            walls = {e: pooled(e, sources, workload, url) for e in args.evaluators}
        finally:
            ray.shutdown()
    agent = f"a scripted model answering after {args.latency:g} s" if url else "the offline task agent"
    print(f"{len(sources)} candidates x ({len(workload.texts)} texts, {len(workload.items)} episodes), {agent}, "
          f"a local Ray of {max(args.evaluators)} CPUs, one CPU per evaluator")
    print(f"{'E':>3} {'wall s':>8} {'cand/min':>9} {'episodes/min':>13} {'vs E=1':>7} {'efficiency':>11}")
    base = walls.get(args.evaluators[0])
    for e, wall in walls.items():
        speedup = base / wall
        print(f"{e:>3} {wall:8.1f} {len(sources) / wall * 60:9.1f} {len(sources) * len(workload.items) / wall * 60:13.1f} "
              f"{speedup:6.2f}x {speedup / (e / args.evaluators[0]):11.2f}")


if __name__ == "__main__":
    main()
