"""How the driver scales with the number of candidates, simulated rather than guessed.

The real driver (``SearchDriver``: policy, structure index, incumbent, run directory and its fsync'ed logs,
the live line, the confirmation, the test and the structural clusters at the end) runs a whole search on a
``ray.cluster_utils.Cluster`` of several nodes on this machine; only its workers are stand-ins, given to it
through its one injection point, the pool's actor factories (``SearchDriver(workers=...)``):

- the evaluator answers at once (or after ``--latency`` seconds) with per-question scores drawn from a
  quality the program carries in a comment (no sandbox, no model);
- the reflector makes a real child: an offline mutation (``mstar_ray.reflect.offline``, the structural
  changes a search makes) checked by the reflector's own ``check_child`` (contract, novelty against the
  known ids; no sandbox smoke test), whose quality is its parent's plus a little noise, so good parents
  tend to have good children and lines of descent grow as in a search.

Each size runs in its own process (peak memory is that run's). Per size: the driver's CPU time per candidate
in the search loop and where it goes (placing a program among the known ones: novelty; building reflection
requests; the logs; the state), its peak memory, the size of each log, the time the end takes (structural
families), and then, on the finished run directory, ``status``, ``report`` and what a resume does before it
can hand out work (the replay of the logs and the policy's restore). All times are CPU seconds of the driver
process unless marked wall; one run each, on a shared machine: read the ratios, not the digits.

    .venv/bin/python scripts/bench_scale.py [--candidates 100 1000 10000] [--evaluators 16] [--latency 0]
        [--nodes 4] [--timeout 3600] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ray  # noqa: E402

QUALITY = re.compile(r"^# simulated quality ([0-9.]+)$", re.MULTILINE)
SEED_QUALITY = 0.3


def quality(source: str) -> float:
    found = QUALITY.findall(source)
    return float(found[-1]) if found else SEED_QUALITY


@ray.remote
class InstantEvaluator:
    """Answers an ``EvalJob`` at once: every question scored from the program's simulated quality and a
    per-question draw, the way a real evaluation's outcome looks to the driver."""

    def __init__(self, latency_s: float):
        self.latency_s = latency_s

    def sandbox_layers(self) -> dict:
        return {"layers": ["simulated"], "missing": {}}

    def evaluate(self, job):
        from mstar_ray.results import EvalReport, ItemResult, SandboxInfo, summarise
        from mstar_ray.search.jobs import EvalOutcome, static_score

        time.sleep(self.latency_s)
        base = quality(job.source)
        results = []
        for item in job.items:
            draw = (zlib.crc32(f"{job.candidate_id}:{item.id}".encode()) % 1000) / 1000
            score = min(1.0, max(0.0, base + 0.4 * (draw - 0.5)))
            results.append(ItemResult(id=item.id, category=item.category, question=item.question,
                                      expected=item.answer, prediction="simulated", score=score,
                                      context="simulated context " * 20))
        overall, categories = summarise(results)
        report = EvalReport(task=job.task_name, backend="simulated", embedder="none", texts_written=len(job.texts),
                            score=overall, categories=categories, results=results, calls={}, wall_seconds=self.latency_s,
                            sandbox=SandboxInfo(layers=[], missing_layers={}, ready_seconds=None),
                            write_example={"raw_text": job.texts[0].text[:200], "item": {"fact": "simulated"}})
        return EvalOutcome(candidate_id=job.candidate_id, purpose=job.purpose, report=report,
                           static_score=static_score(report, job.static_ids), node_id=ray.get_runtime_context().get_node_id(),
                           worker_pid=os.getpid())


@ray.remote
class InstantReflector:
    """A real offline mutation of the parent, checked as a reflector checks a child (but for the sandbox smoke
    test), with a simulated quality near its parent's."""

    def __init__(self, latency_s: float):
        self.latency_s = latency_s

    def sandbox_layers(self) -> dict:
        return {"layers": ["simulated"], "missing": {}}

    def reflect(self, request):
        from mstar_ray.program_id import program_id
        from mstar_ray.reflect.offline import NoMutation, propose
        from mstar_ray.reflect.reflector import Child, Discard, ReflectionOutcome, check_child

        time.sleep(self.latency_s)
        rng = random.Random(request.seed)
        try:
            mutation = propose(request.parent_source, request.donors, rng)
        except NoMutation as exc:
            return ReflectionOutcome(result=Discard(parent=request.parent_id, reason=str(exc), attempts=1, errors=[]))
        grown = min(1.0, max(0.0, quality(request.parent_source) + rng.gauss(0.004, 0.03)))
        source = QUALITY.sub("", mutation.source).rstrip() + f"\n# simulated quality {grown:.4f}\n"
        error = check_child(request.parent_source, source, request, lambda _: None)
        if error is not None:
            return ReflectionOutcome(result=Discard(parent=request.parent_id, reason=error[:200], attempts=1,
                                                    errors=[error[:200]]))
        return ReflectionOutcome(result=Child(
            id=program_id(source), source=source, parent=request.parent_id, origin=f"mutation:{mutation.kind}",
            commit_message=mutation.description, iteration=request.iteration, patch=None, edit_format="mutation",
            attempts=1))


class Timers:
    """CPU seconds spent in chosen methods (wrapped on their classes), and how often each was called."""

    def __init__(self) -> None:
        self.seconds: collections.Counter[str] = collections.Counter()
        self.wall: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self.samples: dict[str, list[tuple[int, float]]] = collections.defaultdict(list)

    def wrap(self, cls, name: str, label: str, size=None) -> None:
        original = getattr(cls, name)
        timers = self

        def timed(self, *args, **kwargs):
            started, wall = time.process_time(), time.monotonic()
            try:
                return original(self, *args, **kwargs)
            finally:
                spent = time.process_time() - started
                timers.seconds[label] += spent
                timers.wall[label] += time.monotonic() - wall
                timers.calls[label] += 1
                if size is not None:
                    timers.samples[label].append((size(self), spent))

        setattr(cls, name, timed)


def config_for(candidates: int, evaluators: int) -> dict:
    return {
        "task": {"name": "synthetic", "seed": 1},
        "split": {"static_size": 12, "rotating_size": 2, "train_ratio": 2.0, "confirmation_size": 6},
        "search": {"seeds": ["vector_search", "llm_summarizer", "experience_learner"], "max_candidates": candidates,
                   "reflections_in_flight": min(evaluators, 8), "evaluations_in_flight": evaluators,
                   "reflector": "offline", "seed": 0},
        "llm": {"embedding": {"kind": "hashing"}},
        "ray": {"evaluator_cpus": 0.01},
    }


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def one(candidates: int, evaluators: int, latency: float, nodes: int, run_dir: Path) -> dict:
    """One simulated search of ``candidates`` children, then status, report and a resume's set-up on its directory."""
    from ray.cluster_utils import Cluster

    from mstar_ray.search_loop.endgame import Endgame
    from mstar_ray.search_loop.policy import SearchPolicy
    from mstar_ray.driver.progress import Progress, ProgressState
    from mstar_ray.driver.recorder import RunRecorder
    from mstar_ray.driver.run_dir import RunDir
    from mstar_ray.driver.search_driver import SearchDriver
    from mstar_ray.embedding.hashing import HashingEmbedder
    from mstar_ray.inspect.report import build_report
    from mstar_ray.inspect.status import status_text
    from mstar_ray.run_config import RunConfig, resolve_seeds
    from mstar_ray.runlog.writer import LogWriter
    from mstar_ray.search.split import SplitPlan
    from mstar_ray.state.candidate import Seed
    from mstar_ray.state.replay import restore
    from mstar_ray.state.search_state import SearchState
    from mstar_ray.structure.index import StructureIndex
    from mstar_ray.families.task_registry import task_from_config

    timers = Timers()
    timers.wrap(StructureIndex, "place", "novelty (place a program)", size=len)
    timers.wrap(SearchPolicy, "_reflection_request", "reflection requests")
    timers.wrap(LogWriter, "append", "logs (append + fsync)")
    timers.wrap(SearchState, "apply", "state transitions")
    timers.wrap(SearchDriver, "_population_map", "structural clusters (end)")
    timers.wrap(Endgame, "_evaluate", "confirmation and test (end)")
    loop = {}
    original_drive = SearchPolicy.drive

    def drive(self, pool, between=lambda: None):
        loop["cpu"], loop["wall"] = time.process_time(), time.monotonic()
        try:
            return original_drive(self, pool, between)
        finally:
            loop["cpu"], loop["wall"] = time.process_time() - loop["cpu"], time.monotonic() - loop["wall"]

    SearchPolicy.drive = drive

    config = RunConfig.model_validate(config_for(candidates, evaluators))
    seeds = [Seed(path.stem, path.read_text()) for path in resolve_seeds(config, ROOT / "experiments" / "x.yaml")]
    task = task_from_config(config.task)
    directory = RunDir(run_dir)
    directory.write_seeds(seeds)
    directory.write_config(config)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False)
    workers = {
        "evaluate": lambda: InstantEvaluator.options(num_cpus=0.01, scheduling_strategy="SPREAD").remote(latency),
        "reflect": lambda: InstantReflector.options(num_cpus=0).remote(latency),
    }
    started_cpu, started_wall = time.process_time(), time.monotonic()
    try:
        driver = SearchDriver(config, seeds, task, directory, Progress(io.StringIO()), workers=workers)
        result = driver.run()
    finally:
        ray.shutdown()
        cluster.shutdown()
    total_cpu, total_wall = time.process_time() - started_cpu, time.monotonic() - started_wall
    directory.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    sizes = {path.name: path.stat().st_size for path in run_dir.glob("*.arrows")}
    sizes["programs/"] = sum(p.stat().st_size for p in (run_dir / "programs").iterdir())
    measured = {"candidates": candidates, "evaluators": evaluators, "latency_s": latency,
                "members": len(driver.policy.state.members), "evaluated": driver.policy.state.evaluated,
                "reflections": driver.policy.state.iterations, "duplicates": driver.policy.state.duplicates,
                "discarded": driver.policy.state.discarded,
                "wall_s": total_wall, "cpu_s": total_cpu, "loop_cpu_s": loop["cpu"], "loop_wall_s": loop["wall"],
                "peak_rss_mb": peak, "rss_after_run_mb": rss_mb(), "log_bytes": sizes,
                "parts_cpu_s": dict(timers.seconds), "parts_wall_s": dict(timers.wall), "parts_calls": dict(timers.calls)}
    place = timers.samples["novelty (place a program)"]
    measured["place_samples"] = [(known, round(spent * 1000, 3)) for known, spent in place[:: max(1, len(place) // 40)]]
    # What reads the finished directory: status, report, and a resume up to the point it hands out work.
    for label, action in (("status_s", lambda: status_text(run_dir)), ("report_s", lambda: build_report(run_dir))):
        started = time.process_time()
        action()
        measured[label] = time.process_time() - started
    started = time.process_time()
    state = restore(run_dir)
    measured["resume_replay_s"] = time.process_time() - started
    plan = SplitPlan(task, HashingEmbedder(), test_fraction=config.split.test_fraction,
                     static_size=config.split.static_size, rotating_size=config.split.rotating_size,
                     train_ratio=config.split.train_ratio, seed=config.search.seed,
                     confirmation_size=config.split.confirmation_size)
    resumed_dir = RunDir(Path(tempfile.mkdtemp()) / "resumed")
    # A resume reads the queued programs' sources back to re-learn their structure (not timed: a copy, so the
    # finished directory stays as the run left it).
    shutil.copytree(run_dir / "programs", resumed_dir.path / "programs", dirs_exist_ok=True)
    policy = SearchPolicy(config, task, plan, RunRecorder(resumed_dir, Progress(io.StringIO()), ProgressState()),
                          evaluators=evaluators, llm_spent=lambda: None)
    started = time.process_time()
    policy.start([seed.candidate() for seed in seeds], state, resumed_dir.read_program)
    measured["resume_restore_s"] = time.process_time() - started
    resumed_dir.close()
    return measured


def table(results: list[dict]) -> str:
    parts = sorted({part for r in results for part in r["parts_cpu_s"]})
    lines = ["| n (children) | E | members | wall s | loop CPU ms/cand | " + " | ".join(f"{p} ms/cand" for p in parts)
             + " | peak RSS MB | logs MB | status s | report s | resume: replay s | resume: restore s |",
             "|" + "---|" * (10 + len(parts))]
    for r in results:
        n = r["evaluated"]
        logs = sum(r["log_bytes"].values()) / 1e6
        cells = " | ".join(f"{r['parts_cpu_s'].get(p, 0.0) / n * 1000:.2f}" for p in parts)
        lines.append(f"| {n} | {r['evaluators']} | {r['members']} | {r['wall_s']:.0f} | {r['loop_cpu_s'] / n * 1000:.1f} | "
                     f"{cells} | {r['peak_rss_mb']:.0f} | {logs:.1f} | {r['status_s']:.1f} | {r['report_s']:.1f} | "
                     f"{r['resume_replay_s']:.1f} | {r['resume_restore_s']:.1f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--candidates", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--evaluators", type=int, nargs="+", default=[16])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each stand-in worker takes per job")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one size may take before it is given up")
    parser.add_argument("--keep", default=None, help="keep each run directory under DIR")
    parser.add_argument("--json", default=None, help="also write the measurements to this file")
    parser.add_argument("--one", type=int, nargs=2, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--run-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], args.latency, args.nodes, Path(args.run_dir))))
        return 0
    results = []
    for evaluators in args.evaluators:
        for candidates in args.candidates:
            base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp())
            run_dir = base / f"n{candidates}-e{evaluators}"
            command = [sys.executable, __file__, "--one", str(candidates), str(evaluators), "--latency",
                       str(args.latency), "--nodes", str(args.nodes), "--run-dir", str(run_dir)]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT)
            except subprocess.TimeoutExpired:
                print(f"n={candidates} E={evaluators}: gave up after {args.timeout:g} s", flush=True)
                continue
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                continue
            measured = json.loads(done.stdout.strip().splitlines()[-1])
            results.append(measured)
            print(json.dumps(measured), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
