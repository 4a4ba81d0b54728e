"""Each seed with a real model behind an OpenAI-compatible endpoint (e.g. the SmolLM2 llama.cpp server) on
one LoCoMo conversation: F1, calls, violations and write errors, to show the seeds work with a model and
not only with the offline backend.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/seed_llm_check.py --llm-url http://127.0.0.1:PORT/v1 \\
        --llm-model smollm2 [--seeds a,b] [--conversation 1] [--limit 10] [--cache FILE.sqlite]

The questions are ``--limit`` of the conversation's, spread over categories; the texts written are the
texts (sessions) that hold their evidence (as a search writes a chosen subset of texts, not all of
them), so that a small model on a shared CPU answers in minutes, not hours. Every LLM call of the protocol
(extraction, query, answer, the program's own toolkit calls) goes to the model.
"""

from __future__ import annotations

import argparse
import time

from mstar_ray import seeds as library
from mstar_ray.actors.wiring import RoleClients, probe_endpoints
from mstar_ray.agent.evaluation import evaluate
from mstar_ray.llm.cache import SqliteCache
from mstar_ray.llm.endpoint import EndpointConfig
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from mstar_ray.families.task_registry import load_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm-url", required=True)
    parser.add_argument("--llm-model", required=True)
    parser.add_argument("--llm-max-tokens", type=int, default=128)
    parser.add_argument("--llm-timeout", type=float, default=300.0)
    parser.add_argument("--seeds", default=",".join(s.name for s in library.LIBRARY if s.name not in library.PAPER_SEEDS))
    parser.add_argument("--conversation", type=int, default=1)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--data", default=None)
    parser.add_argument("--cache", default=None)
    args = parser.parse_args()

    endpoint = EndpointConfig(base_url=args.llm_url, model=args.llm_model, max_tokens=args.llm_max_tokens,
                              timeout_s=args.llm_timeout)
    settings = LLMSettings(task=endpoint)
    probe_endpoints(settings)
    roles = RoleClients(settings, cache=SqliteCache(args.cache) if args.cache else None)
    full = load_task("locomo", conversation=args.conversation, limit=args.limit, data=args.data)
    holders = full.evidence_holders()
    wanted = {holders[e] for q in full.items for e in q.evidence if e in holders}
    task = full.model_copy(update={"texts": [t for t in full.texts if t.id in wanted]})
    print(f"{task.name}: {len(task.items)} questions, the {len(task.texts)} texts holding their evidence "
          f"({', '.join(t.id for t in task.texts)}); model {args.llm_model}", flush=True)
    rows = []
    for name in args.seeds.split(","):
        started = time.monotonic()
        report = evaluate(library.entry(name).path.read_text(encoding="utf-8"), task, roles.backend(),
                          roles.embedder(), limits=SandboxLimits(call_timeout_s=args.llm_timeout))
        calls = report.calls
        requests = sum(u.requests for u in report.llm.values())
        violation = f"{report.violation.phase} [{report.violation.kind}]" if report.violation else "-"
        rows.append(f"| {name} | {report.score:.3f} | {calls['extract']} / {calls['query']} / {calls['answer']} | "
                    f"{calls['toolkit_llm']} | {requests} | {report.write_errors} | {violation} | "
                    f"{time.monotonic() - started:.0f} |")
        print(rows[-1], flush=True)
    print("\n| seed | F1 | extract / query / answer | toolkit LLM calls | model requests | write errors | "
          "violation | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
