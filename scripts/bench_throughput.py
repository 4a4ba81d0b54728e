"""Throughput of evaluation against the M* reference's shape, on a realistic, latency-bound workload.

The workload: candidates of two seeds, ``vector_search`` (no LLM in read) and, one in four,
``llm_summarizer`` (one toolkit LLM call in every read), each with its own instruction text so that no
candidate hits another's cached replies; the synthetic task's first 40 texts (one turn each) and 30 questions;
the task agent is the scripted OpenAI-compatible server (``tests/scripted_server.py``), which answers after a
fixed latency and counts the requests in flight.

Three ways to evaluate, all on the same sandbox, backend, endpoint client and embedder:

- the fully serial loop: ``evaluate`` with the serial protocol (every call waits for the one before);
- the reference's shape (wbopan/mstar, ``src/mstar/evolution/evaluator.py``): one process, one candidate at a
  time, the program executed in that process (no sandbox), each evaluation in barrier rounds on a 64-thread
  pool: every extraction, then the writes in order, every query, then **every read at once on the pool**
  (one knowledge base shared by the threads), every answer (written here after that description, on this
  project's backend, endpoint client, embedder and toolkit);
- ours: the pipelined evaluation (``mstar_ray.agent.concurrency``), E of them at once on evaluator actors sharing
  the run's gateway actor (the cluster-wide in-flight limit) and cache actor.

Prints, measured in one run (timings drift on a shared machine; the ratios are the figures): one evaluation's
wall, ours against the reference shape and the serial loop, for each seed; candidates per minute for each E
against the reference shape; the requests in flight at the server (peak and mean while candidates wait)
against the configured limit, in a run where that limit binds; and the offline backend's evaluation of
``OFFLINE_SEEDS``, with reads in the program's process and from forked readers, and before (``--before``: a
checkout of the code before a change, e.g. without the pipeline or with Chroma in the program's process).

    .venv/bin/python scripts/bench_throughput.py                  # the short run: latency 1 s, a few minutes
    .venv/bin/python scripts/bench_throughput.py --full           # latency 1 s and 3 s, more candidates
        [--latency 1 3] [--evaluators 1 4 16] [--limit 256] [--bound-limit 16] [--before /work/main]
        [--readers 4] [--parts one pooled bound offline]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import types
import uuid
from typing import Any
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import ray  # noqa: E402

from mstar_ray.actors.evaluator_actor import EvaluatorActor  # noqa: E402
from mstar_ray.actors.run_services import start_run_services  # noqa: E402
from mstar_ray.actors.wiring import RoleClients  # noqa: E402
from mstar_ray.agent.evaluation import evaluate  # noqa: E402
from mstar_ray.agent.concurrency import SERIAL, EvalConcurrency  # noqa: E402
from mstar_ray.contract import inspect_program  # noqa: E402
from mstar_ray.families.qa import ANSWER  # noqa: E402
from mstar_ray.families.step import Shown  # noqa: E402
from mstar_ray.llm.endpoint import EndpointConfig  # noqa: E402
from mstar_ray.llm.settings import EmbeddingConfig, LLMSettings  # noqa: E402
from mstar_ray.program_id import program_id  # noqa: E402
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits  # noqa: E402
from mstar_ray.sandbox.toolkit import Toolkit  # noqa: E402
from mstar_ray.search.jobs import EvalJob  # noqa: E402
from mstar_ray.tasks.model import Task  # noqa: E402
from mstar_ray.families.task_registry import load_task  # noqa: E402
from mstar_ray.families.qa.scoring import token_f1  # noqa: E402
from tests.scripted_server import ScriptedServer  # noqa: E402

PARTS = ("one", "pooled", "bound", "offline")
REFERENCE_POOL = 64  # the reference's batch pool (its largest round here is 40 requests: more threads change nothing)
SEEDS = ("vector_search", "vector_search", "vector_search", "llm_summarizer")  # the mix, cycled
# The seeds whose read() calls the model (one evaluation each against the reference's shape): their reads are
# what forked readers serve at once (memory_lace reads its Chroma collections from its readers too).
READ_MODEL_SEEDS = ("llm_summarizer", "selfmem", "grounding", "memforest", "memskill", "rulemem", "memory_lace")
# No model: what a fork costs an offline evaluation (rulemem), and what relaying its Chroma calls to the
# program's Chroma process costs one whose every write and read calls Chroma (vector_search).
OFFLINE_SEEDS = ("rulemem", "vector_search")
LIMITS = SandboxLimits(call_timeout_s=120)


def workload(texts: int, questions: int) -> Task:
    full = load_task("synthetic", seed=0, granularity="turn")
    return Task(name="bench", texts=full.texts[:texts], items=full.items[:questions])


def candidates(count: int, seeds: tuple[str, ...] = SEEDS) -> list[str]:
    """Each with its own instruction text: every request is a miss, whichever candidate runs first."""
    out = []
    for index in range(count):
        source = (ROOT / "seeds" / f"{seeds[index % len(seeds)]}.py").read_text()
        for name in ("INSTRUCTION_KNOWLEDGE_ITEM", "INSTRUCTION_QUERY", "INSTRUCTION_RESPONSE"):
            source = re.sub(rf"^{name} = (\(?)", rf'{name} = \1"(variant {index}) " ', source, count=1, flags=re.MULTILINE)
        out.append(source)
    return out


def settings_for(url: str, limit: int | None) -> LLMSettings:
    return LLMSettings(task=EndpointConfig(base_url=url, model="scripted", max_tokens=32, timeout_s=60,
                                           max_concurrency=limit),
                       embedding=EmbeddingConfig(kind="hashing"))


class InFlight:
    """The server's requests in flight: its peak since ``reset``, and samples every 20 ms while ``metering``."""

    def __init__(self, server: ScriptedServer):
        self.server, self.samples, self.metering = server, [], False
        server.max_in_flight = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._done = threading.Event()
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.02):
            if self.metering:
                self.samples.append(self.server.in_flight)

    def close(self) -> None:
        self._done.set()
        self._thread.join()

    @property
    def peak(self) -> int:
        return self.server.max_in_flight

    @property
    def mean(self) -> float:
        return sum(self.samples) / len(self.samples) if self.samples else 0.0


def _in_process(source: str, backend, embedder) -> dict:
    """The program executed in this process, as the reference runs it: its namespace, with a knowledge base on
    a toolkit whose LLM and embedding requests go straight to this process's backend and embedder."""
    module = types.ModuleType(f"bench_program_{uuid.uuid4().hex}")
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    namespace = module.__dict__
    exec(compile(source, "program.py", "exec"), namespace)

    def ask(request: dict) -> dict:
        if request["op"] == "llm":
            return {"ok": True, "text": backend.toolkit_completion([{"role": "user", "content": request["prompt"]}])}
        return {"vectors": embedder.embed(request["texts"])}

    toolkit = Toolkit(ask, tempfile.mkdtemp(prefix="bench-reference-"))
    toolkit.chroma = _InProcessChroma(embedder)  # as the reference holds it: a client in its own process
    namespace["kb"] = namespace["KnowledgeBase"](toolkit)
    return namespace


class _InProcessChroma:
    """A ChromaDB client in this process, emptied first, whose collections embed with ``embedder``."""

    def __init__(self, embedder) -> None:
        import chromadb
        from chromadb.config import Settings

        class Embed(chromadb.EmbeddingFunction):
            def __init__(self) -> None:
                pass

            def __call__(self, input):  # noqa: A002 - Chroma's name for it
                return embedder.embed([str(text) for text in input])

            @staticmethod
            def name() -> str:
                return "bench"

            def get_config(self) -> dict:
                return {}

        self._client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False, allow_reset=True))
        self._client.reset()  # clients in one process share their collections: each evaluation starts empty
        self._embed = Embed()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name not in ("create_collection", "get_or_create_collection", "get_collection"):
            return attr
        return lambda *args, **kwargs: attr(*args, **{"embedding_function": self._embed, **kwargs})


def _read_or_error(kb: Any, query: Any) -> str:
    """One read as the reference makes it: its reads share one knowledge base across its pool's threads, and a
    read that raises (a SQLite connection used by two threads at once, say) is that read's result, not the
    evaluation's end."""
    try:
        return str(kb.read(query))[:3000]
    except Exception as exc:  # noqa: BLE001 - the reference keeps the exception as the read's result
        return f"error: {exc}"


def reference_shape(source: str, task: Task, roles: RoleClients, pool: concurrent.futures.Executor) -> float:
    """One evaluation in the reference's barrier rounds, its reads at once on the pool; returns its mean token F1
    (a check that it did the work)."""
    info = inspect_program(source)
    constants, schema = info.constants, info.schema
    backend, embedder = roles.backend(), roles.embedder()
    program = _in_process(source, backend, embedder)
    kb, item_class, query_class = program["kb"], program["KnowledgeItem"], program["Query"]
    items = list(pool.map(lambda text: backend.extract_item(
        constants["INSTRUCTION_KNOWLEDGE_ITEM"], schema.knowledge_item, text.text), task.texts))
    for text, item in zip(task.texts, items):
        kb.write(item_class(**item), text.text)
    queries = list(pool.map(lambda q: backend.build_query(constants["INSTRUCTION_QUERY"], schema.query, q.question),
                            task.items))
    contexts = list(pool.map(lambda query: _read_or_error(kb, query_class(**query)), queries))
    answers = list(pool.map(lambda pair: backend.perform(ANSWER, Shown(
        constants["INSTRUCTION_RESPONSE"], constants["ALWAYS_ON_KNOWLEDGE"], pair[0]), pair[1].question),
                            zip(contexts, task.items)))
    return sum(token_f1(a, q.answer) for a, q in zip(answers, task.items)) / len(task.items)


def one_evaluation(server: ScriptedServer, task: Task, seeds: tuple[str, ...], ours: EvalConcurrency,
                   serial: tuple[str, ...], reference_pool: int) -> dict[str, dict[str, float]]:
    """Each seed's first candidate: the wall of one evaluation, ours, the reference shape, and serial for ``serial``;
    and the requests in flight at the server at peak, ours and the reference's (``ours peak``, ``reference peak``)."""
    url = server.base_url
    sources = candidates(len(seeds), seeds)
    walls: dict[str, dict[str, float]] = {}
    pool = concurrent.futures.ThreadPoolExecutor(reference_pool)
    small = Task(name="warm", texts=task.texts[:2], items=task.items[:2])
    _ours(url, sources[0].replace("(variant", "(warm-up variant"), small, SERIAL)  # the fork server, the imports
    for seed in dict.fromkeys(seeds):
        source = sources[seeds.index(seed)]
        row = walls.setdefault(seed, {})
        for label, run in (
            ("ours", lambda s: _ours(url, s, task, ours)),
            ("reference", lambda s: reference_shape(s, task, RoleClients(settings_for(url, None)), pool)),
            *([("serial", lambda s: _ours(url, s, task, SERIAL))] if serial and seed in serial else []),
        ):
            server.max_in_flight = 0
            started = time.monotonic()
            run(source.replace("(variant", f"({label} variant"))
            row[label] = time.monotonic() - started
            row[f"{label} peak"] = server.max_in_flight
    pool.shutdown()
    return walls


def _ours(url: str, source: str, task: Task, concurrency: EvalConcurrency) -> float:
    roles = RoleClients(settings_for(url, None))
    report = evaluate(source, task, roles.backend(), roles.embedder(), limits=LIMITS, concurrency=concurrency)
    assert report.violation is None, report.violation
    return report.score


def reference_rate(url: str, task: Task, sources: list[str]) -> float:
    """Candidates per minute of the reference shape over one cycle of the mix."""
    pool = concurrent.futures.ThreadPoolExecutor(REFERENCE_POOL)
    started = time.monotonic()
    for source in sources:
        reference_shape(source, task, RoleClients(settings_for(url, None)), pool)
    pool.shutdown()
    return len(sources) / (time.monotonic() - started) * 60


def pooled(server: ScriptedServer, evaluators: int, sources: list[str], task: Task, limit: int | None,
           ours: EvalConcurrency) -> tuple[float, InFlight]:
    """The wall of the whole workload on ``evaluators`` actors sharing the run's services, and the in-flight record
    while every evaluator was busy (candidates waiting)."""
    settings = settings_for(server.base_url, limit)
    with tempfile.TemporaryDirectory() as run_dir:
        cache, gateway = start_run_services(run_dir, settings)
        pool = [EvaluatorActor.options(num_cpus=0.01).remote(settings, LIMITS, cache.name, gateway.name, None,
                                                             ours)
                for _ in range(evaluators)]
        ray.get([actor.pid.remote() for actor in pool])  # started before the clock runs
        jobs = [EvalJob(candidate_id=program_id(s), source=s, purpose="search", task_name=task.name, texts=task.texts,
                        items=task.items, static_ids=[q.id for q in task.items]) for s in sources]
        queue, idle, flights = list(jobs), list(pool), {}
        meter = InFlight(server)
        started = time.monotonic()
        while queue or flights:
            while idle and queue:
                actor = idle.pop()
                flights[actor.evaluate.remote(queue.pop(0))] = actor
            meter.metering = bool(queue)  # every evaluator busy and candidates waiting: the steady state
            done, _ = ray.wait(list(flights), num_returns=1)
            outcome = ray.get(done[0])
            assert outcome.report.violation is None, outcome.report.violation
            idle.append(flights.pop(done[0]))
        wall = time.monotonic() - started
        meter.close()
        for actor in pool:
            ray.kill(actor)
        return wall, meter


OFFLINE_SNIPPET = """
import os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.tasks.model import Task
from mstar_ray.families.task_registry import load_task
full = load_task("synthetic", seed=0, granularity="turn")
task = Task(name="bench", texts=full.texts[:{texts}], items=full.items[:{questions}])
source = open({seed!r}).read()
concurrency = {concurrency}
evaluate(source, task, OfflineBackend(), HashingEmbedder(), concurrency=concurrency)  # warm: the fork server
started = time.monotonic()
for _ in range({repeats}):
    report = evaluate(source, task, OfflineBackend(), HashingEmbedder(), concurrency=concurrency)
print(time.monotonic() - started, report.score, getattr(report.sandbox, "reads", None))
"""


def offline_wall(tree: Path, seed: str, texts: int, questions: int, repeats: int,
                 readers: int | None = None) -> tuple[float, float]:
    """One offline evaluation of ``seed`` in ``tree``: its wall and score; ``readers`` set the key (a tree from
    before it has none)."""
    concurrency = "None" if readers is None else f"__import__('mstar_ray.results').results.EvalConcurrency(" \
        f"in_flight=1, episodes=1, readers={readers})"
    snippet = OFFLINE_SNIPPET.format(texts=texts, questions=questions, seed=str(ROOT / "seeds" / f"{seed}.py"),
                                     repeats=repeats, concurrency=concurrency)
    out = subprocess.run([sys.executable, "-c", snippet], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]) / repeats, float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", action="store_true", help="latency 1 s and 3 s, 64 candidates at E = 16")
    parser.add_argument("--latency", type=float, nargs="+", default=None, help="seconds per request (default 1; full: 1 3)")
    parser.add_argument("--texts", type=int, default=40)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--evaluators", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--in-flight", type=int, default=REFERENCE_POOL, help="evaluation.in_flight of ours (default: "
                        "the reference's pool)")
    parser.add_argument("--reference-pool", type=int, default=REFERENCE_POOL, help="threads of the reference's pool")
    parser.add_argument("--readers", type=int, default=EvalConcurrency().readers, help="evaluation.readers of ours")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                        help="what to measure (default all): one evaluation per seed, E evaluators at once, the limit "
                        "binding, the offline evaluation")
    parser.add_argument("--limit", type=int, default=1024, help="the endpoint's max_concurrency in the E runs "
                        "(a hosted API's: high enough not to bind)")
    parser.add_argument("--bound-limit", type=int, default=16, help="the endpoint's max_concurrency in the run where it binds")
    parser.add_argument("--bound-evaluators", type=int, default=8)
    parser.add_argument("--bound-candidates", type=int, default=12)
    parser.add_argument("--no-serial", action="store_true", help="leave out the fully serial evaluation (the longest; "
                        "the short run times it on vector_search only)")
    parser.add_argument("--before", type=Path, default=None, help="a checkout without the pipeline (e.g. /work/main): "
                        "the offline backend's evaluation there against here")
    args = parser.parse_args()
    latencies = args.latency or ([1.0, 3.0] if args.full else [1.0])
    task = workload(args.texts, args.questions)
    print(f"workload: {len(task.texts)} texts, {len(task.items)} questions; candidates cycle {', '.join(SEEDS)} "
          f"(llm_summarizer: one toolkit LLM call per read); ours: evaluation.in_flight {args.in_flight}, "
          f"readers {args.readers}; the reference's pool: {args.reference_pool} threads")
    ours = EvalConcurrency(in_flight=args.in_flight, readers=args.readers)
    try:
        for latency in latencies:
            with ScriptedServer(latency_s=latency) as server:
                print(f"\n== scripted model latency {latency:g} s")
                serial = () if args.no_serial else tuple(dict.fromkeys(SEEDS)) if args.full else ("vector_search",)
                seeds = tuple(dict.fromkeys(SEEDS + (READ_MODEL_SEEDS if latency else ())))
                walls = one_evaluation(server, task, seeds, ours, serial, args.reference_pool) if "one" in args.parts else {}
                print(f"{'one evaluation, wall s':<26}{'ours':>8}{'reference':>11}{'serial':>8}{'ours/ref':>10}"
                      f"{'serial/ours':>12}{'peak in flight, ours/ref':>26}")
                for seed, row in walls.items():
                    serial = row.get("serial")
                    print(f"{seed:<26}{row['ours']:8.1f}{row['reference']:11.1f}"
                          f"{serial if serial else float('nan'):8.1f}{row['ours'] / row['reference']:9.2f}x"
                          f"{(serial / row['ours']) if serial else float('nan'):11.1f}x"
                          f"{row['ours peak']:>21.0f}/{row['reference peak']:.0f}")
                if "pooled" not in args.parts and "bound" not in args.parts:
                    continue
                reference = reference_rate(server.base_url, task, candidates(len(SEEDS)))
                if not ray.is_initialized():
                    # a Ray of its own: other runs on the machine (a shared host) are not ours to join
                    ray.init(address="local", num_cpus=2, log_to_driver=False)
                print(f"reference shape: {reference:.2f} candidates/min (one cycle of the mix, one process)")
                print(f"{'E':>4}{'candidates':>11}{'wall s':>8}{'cand/min':>10}{'vs reference':>14}{'peak in flight':>16}")
                for e in args.evaluators if "pooled" in args.parts else ():
                    count = max(len(SEEDS), (4 if args.full else 2) * e)
                    wall, meter = pooled(server, e, candidates(count), task, args.limit, ours)
                    rate = count / wall * 60
                    print(f"{e:>4}{count:>11}{wall:8.1f}{rate:10.2f}{rate / reference:13.1f}x{meter.peak:>16}")
                if "bound" not in args.parts:
                    continue
                e, count = args.bound_evaluators, args.bound_candidates
                wall, meter = pooled(server, e, candidates(count), task, args.bound_limit, ours)
                print(f"limit {args.bound_limit} binding (E = {e}, {count} candidates): peak {meter.peak} in flight "
                      f"(limit {args.bound_limit}), mean {meter.mean:.2f} while candidates waited "
                      f"({meter.mean / args.bound_limit:.2f} of the limit), {count / wall * 60:.2f} candidates/min")
    finally:
        ray.shutdown()
    if "offline" not in args.parts:
        return
    for seed in OFFLINE_SEEDS:
        serial, score_serial = offline_wall(ROOT, seed, args.texts, args.questions, 3, readers=1)
        forked, score_forked = offline_wall(ROOT, seed, args.texts, args.questions, 3, readers=4)
        print(f"\noffline backend, one evaluation of {seed}: reads in its process {serial:.2f} s, from forked "
              f"readers {forked:.2f} s (forked/serial {forked / serial:.2f}); scores {score_serial:.4f} and "
              f"{score_forked:.4f}")
        if args.before is not None:
            before, score_before = offline_wall(args.before, seed, args.texts, args.questions, 3, readers=1)
            print(f"offline backend, before ({args.before}), reads in its process: {before:.2f} s (now/before "
                  f"{serial / before:.2f}); score {score_before:.4f}")


if __name__ == "__main__":
    main()
