"""How many reflector replies become valid children, per edit format (v4a, function, file).

1. On the reply fixtures (tests/fixtures/replies: each failure mode measured with small models, and
   good replies), each read in the format its file name gives, checked and smoke-tested as in a run.
2. With ``--smollm2`` (or ``--url URL --model NAME`` for a server you run), real reflections on
   ``--requests`` distinct parents (the seeds and offline mutations of them, evaluated with the offline
   task agent on the synthetic task for their failure cases) per format, temperature 0.7, with
   ``--repairs`` repair turns; every reply is put through the same path as in a search.

    .venv/bin/python scripts/bench_edit_formats.py [--smollm2] [--requests 6] [--repairs 1]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_programs import seeds_and_mutants  # noqa: E402
from mstar_ray.agent.evaluation import evaluate  # noqa: E402
from mstar_ray.agent.offline import OfflineBackend  # noqa: E402
from mstar_ray.embedding.hashing import HashingEmbedder  # noqa: E402
from mstar_ray.llm.cache import MemoryCache  # noqa: E402
from mstar_ray.llm.client import LLMClient  # noqa: E402
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig  # noqa: E402
from mstar_ray.program_id import program_id  # noqa: E402
from mstar_ray.reflect.edit_formats import EDIT_FORMATS, read_edit  # noqa: E402
from mstar_ray.reflect.function_edit import EditError  # noqa: E402
from mstar_ray.reflect.one_shot import LLMReflector  # noqa: E402
from mstar_ray.reflect.reflector import Child, check_child  # noqa: E402
from mstar_ray.reflect.reply import ReplyError  # noqa: E402
from mstar_ray.reflect.request import ReflectionRequest, sample_cases  # noqa: E402
from mstar_ray.reflect.smoke import smoke_test  # noqa: E402
from mstar_ray.reflect.v4a import PatchError  # noqa: E402
from mstar_ray.families.task_registry import load_task  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "replies"


def smoke(source: str) -> str | None:
    return smoke_test(source, HashingEmbedder())


def fixtures() -> None:
    parent = (ROOT / "seeds" / "vector_search.py").read_text()
    request = ReflectionRequest(parent_id=program_id(parent), parent_source=parent, parent_score=0.3)
    print("fixtures (tests/fixtures/replies), each read in the format its name gives:")
    for fmt in EDIT_FORMATS:
        paths = sorted(FIXTURES.glob(f"{fmt}_*.txt"))
        valid, tolerant, notes = 0, 0, []
        for path in paths:
            body = path.read_text().split("\n", 1)[1]
            try:
                edit = read_edit(parent, body, fmt)
                error = check_child(parent, edit.source, request, smoke)
            except (ReplyError, PatchError, EditError) as exc:
                error = str(exc)
            if error is None:
                valid += 1
                tolerant += bool(edit.tolerances)
            notes.append(f"{path.stem}: {'child' if error is None else 'error: ' + error.splitlines()[0][:70]}")
        print(f"  {fmt:9} {valid}/{len(paths)} valid children ({tolerant} with a tolerance logged)")
        for note in notes:
            print(f"      {note}")


def requests(count: int) -> list[ReflectionRequest]:
    """Distinct parents (the seeds, then offline mutations of them), each evaluated with the offline task
    agent for its failure cases: a small context leaves only the program in the prompt, so the parents
    must differ for the replies to differ (and for the cache not to answer them all alike)."""
    task = load_task("synthetic", seed=0, granularity="turn")  # the workload the figures in docs/ were measured on
    made = []
    for i, source in enumerate(seeds_and_mutants(count)):
        report = evaluate(source, task, OfflineBackend(), HashingEmbedder(), items=task.items[:12])
        failures, success = sample_cases(report.results, random.Random(i))
        made.append(ReflectionRequest(parent_id=program_id(source), parent_source=source, parent_score=report.score,
                                      failures=failures, success=success, write_example=report.write_example))
    return made


def with_model(url: str, model: str, args: argparse.Namespace) -> None:
    batch = requests(args.requests)
    print(f"\nreal reflections: {model} at {url}, {len(batch)} requests per format, {args.repairs} repair(s), "
          f"max_tokens {args.max_tokens}, context {args.context} tokens")
    for fmt in args.formats:
        config = EndpointConfig(base_url=url, model=model, max_tokens=args.max_tokens, temperature=0.7,
                                json_mode=False, timeout_s=600)
        reflector = LLMReflector(LLMClient(ChatEndpoint("reflector", config), cache=MemoryCache()), edit_format=fmt,
                                 context_tokens=args.context, max_repairs=args.repairs)
        started, outcomes, read_as, messages = time.monotonic(), Counter(), Counter(), []
        for request in batch:
            result = reflector.reflect(request, smoke)
            if isinstance(result, Child):
                outcomes["valid child"] += 1
                read_as[result.edit_format] += 1
                messages.append(f"attempt {result.attempts}: {result.commit_message[:90]!r}")
            else:
                outcomes[reply_kind(result.errors[-1] if result.errors else result.reason)] += 1
        valid = outcomes.pop("valid child", 0)
        formats = ", ".join(f"{k} {v}" for k, v in read_as.items()) or "-"
        print(f"  {fmt:9} {valid}/{len(batch)} valid children (read as: {formats}); last errors of the rest: "
              f"{dict(outcomes) or '-'}; {time.monotonic() - started:.0f} s")
        for message in messages:
            print(f"      child, {message}")


_KINDS = (("not valid Python", "not Python"), ("breaks the contract", "contract"), ("smoke test", "smoke test"),
          ("leaves the program as it was", "no change"), ("already evaluated", "already evaluated"),
          ("hunk", "patch does not apply"), ("holds nothing", "nothing to apply"), ("defines nothing", "nothing to apply"),
          ("Expected", "nothing to apply"), ("refused", "refused (context)"))


def reply_kind(error: str) -> str:
    """A short name for why a reply gave no child (the reply benchmarks count them by it)."""
    return next((kind for marker, kind in _KINDS if marker in error), error.splitlines()[0][:40])


def model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--smollm2", action="store_true", help="start SmolLM2-135M with llama.cpp (tests/llm_server.py)")
    parser.add_argument("--url")
    parser.add_argument("--model")


def with_server(args: argparse.Namespace, run) -> None:
    """``run(url, model, args)`` on SmolLM2 started here (``--smollm2``) or on the server given."""
    if args.smollm2:
        from tests.llm_server import LlamaServer

        with LlamaServer(n_ctx=args.context) as server:
            run(server.base_url, server.model, args)
    elif args.url and args.model:
        run(args.url, args.model, args)


def main() -> None:
    parser = argparse.ArgumentParser()
    model_arguments(parser)
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--repairs", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--formats", nargs="+", choices=EDIT_FORMATS, default=list(EDIT_FORMATS))
    parser.add_argument("--context", type=int, default=2048, help="the server's context window (tokens)")
    args = parser.parse_args()
    fixtures()
    with_server(args, with_model)


if __name__ == "__main__":
    main()
