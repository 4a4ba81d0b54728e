"""What reporting progress from inside an evaluation costs, measured in one run on a local Ray.

1. The evaluator's hook on its common path (called after every write and question, posting nothing
   because the last post is under ``POST_INTERVAL_S`` old): nanoseconds per call.
2. The hook when it posts (fire-and-forget ``ProgressBoard.post``): microseconds per post; an evaluation
   posts about once a second.
3. Whole evaluations by a real ``EvaluatorActor`` with and without a progress board (the synthetic task,
   one text per turn: 261 writes and 40 questions, the vector-search seed, hashing embeddings), run
   alternately; the ratio of the medians is the overhead an evaluation sees.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/bench_eval_progress.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ray  # noqa: E402

from mstar_ray.actors.evaluator_actor import EvaluatorActor  # noqa: E402
from mstar_ray.actors.progress_board import ProgressReporter, start_progress_board  # noqa: E402
from mstar_ray.actors.run_services import start_run_services  # noqa: E402
from mstar_ray.llm.settings import LLMSettings  # noqa: E402
from mstar_ray.results import EvalProgress  # noqa: E402
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits  # noqa: E402
from mstar_ray.search.jobs import EvalJob  # noqa: E402
from mstar_ray.families.task_registry import load_task  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def per_call(hook: ProgressReporter, calls: int) -> float:
    progress = EvalProgress(texts_total=calls, items_total=0)
    started = time.perf_counter()
    for done in range(calls):
        progress.texts_done = done
        hook(progress)
    return (time.perf_counter() - started) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    settings = LLMSettings(embedding={"kind": "hashing"})
    task = load_task("synthetic", seed=1, granularity="turn")
    source = (ROOT / "seeds" / "vector_search.py").read_text()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cache, gateway = start_run_services(tmp, settings)
            board, board_name = start_progress_board()
            quiet = per_call(ProgressReporter(board, "bench:quiet"), 200_000)
            posting = per_call(ProgressReporter(board, "bench:posting", interval_s=0.0), 2_000)
            ray.get(board.snapshot.remote())  # every post delivered before the evaluations start
            with_board = EvaluatorActor.remote(settings, SandboxLimits(), cache.name, gateway.name, board_name)
            without = EvaluatorActor.remote(settings, SandboxLimits(), cache.name, gateway.name)
            job = EvalJob(candidate_id="bench", source=source, purpose="search", task_name=task.name,
                          texts=task.texts, items=task.items, static_ids=[q.id for q in task.items])
            ray.get([with_board.evaluate.remote(job), without.evaluate.remote(job)])  # warm both (sandbox, cache)
            walls: dict[str, list[float]] = {"with": [], "without": []}
            for _ in range(args.repeat):
                for name, actor in (("with", with_board), ("without", without)):
                    outcome = ray.get(actor.evaluate.remote(job))
                    walls[name].append(outcome.report.wall_seconds)
    finally:
        ray.shutdown()
    steps = len(task.texts) + len(task.items)
    with_s, without_s = statistics.median(walls["with"]), statistics.median(walls["without"])
    print(f"hook, nothing posted:  {quiet * 1e9:8.0f} ns per call")
    print(f"hook, posting:         {posting * 1e6:8.1f} us per post (at most one a second per evaluation)")
    print(f"evaluation ({steps} steps), median of {args.repeat}: {with_s:.3f} s with the board, {without_s:.3f} s "
          f"without; ratio {with_s / without_s:.3f}")
    print(f"hook cost per evaluation on its common path: {quiet * steps * 1e3:.3f} ms "
          f"({quiet * steps / without_s:.2%} of the evaluation)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
