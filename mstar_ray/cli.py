"""``mstar-ray``: check a memory program, or evaluate one on a task.

Exit codes: 0 success; 1 the program broke the contract (statically or at run time); 2 bad input
(arguments, missing or malformed data); 3 an LLM endpoint that cannot be used.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mstar_ray.contract import ContractError, check_source
from mstar_ray.llm.errors import EndpointError

EXIT_OK, EXIT_PROGRAM, EXIT_INPUT, EXIT_ENDPOINT = 0, 1, 2, 3


def _read_program(path: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"program file not found: {path}")
    return file.read_text(encoding="utf-8")


def cmd_check(args: argparse.Namespace) -> int:
    source = _read_program(args.program)
    violations = check_source(source)
    for violation in violations:
        print(f"{args.program}:{violation}")
    if violations:
        print(f"{len(violations)} contract violation(s)", file=sys.stderr)
        return EXIT_PROGRAM
    print(f"{args.program}: ok")
    return EXIT_OK


def cmd_eval(args: argparse.Namespace) -> int:
    # Imported here so that `mstar-ray check` stays instant.
    from mstar_ray.agent.hashing_embedder import HashingEmbedder
    from mstar_ray.agent.offline import OfflineBackend
    from mstar_ray.agent.protocol import evaluate
    from mstar_ray.sandbox_host import SandboxLimits
    from mstar_ray.tasks.registry import load_task

    source = _read_program(args.program)
    task = load_task(
        args.task, conversation=args.conversation, limit=args.limit, data_path=args.data, seed=args.seed
    )
    limits = SandboxLimits(call_timeout_s=args.call_timeout)
    backend = OfflineBackend() if args.backend == "offline" else _llm_backend(args)
    report = evaluate(source, task, backend, HashingEmbedder(), limits=limits)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print(_format_report(args.program, report))
    return EXIT_PROGRAM if report.violation else EXIT_OK


def _llm_backend(args: argparse.Namespace):
    from mstar_ray.agent.llm_backend import LLMBackend
    from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig

    if not args.llm_url or not args.llm_model:
        raise ValueError("--backend llm needs --llm-url and --llm-model")
    config = EndpointConfig(
        base_url=args.llm_url, model=args.llm_model, api_key_env=args.llm_key_env, max_tokens=args.llm_max_tokens,
        timeout_s=args.llm_timeout,
    )
    endpoint = ChatEndpoint("task", config)
    endpoint.probe()
    return LLMBackend(endpoint)


def _format_report(program: str, report) -> str:
    nature = "no network, no key; deterministic" if report.backend == "offline" else "real model"
    lines = [
        f"program   {program}",
        f"task      {report.task} ({report.texts_written} texts written, {len(report.results)} questions)",
        f"backend   {report.backend} ({nature}) · embedder {report.embedder}",
        "",
        f"{'category':<18}{'n':>5}{'F1':>9}",
    ]
    for name, category in report.categories.items():
        lines.append(f"{name:<18}{category.n:>5}{category.score:>9.3f}")
    lines.append(f"{'overall':<18}{len(report.results):>5}{report.score:>9.3f}")
    lines.append("")
    calls = report.calls
    lines.append(
        f"calls     extract {calls['extract']} · query {calls['query']} · answer {calls['answer']} · "
        f"toolkit LLM {calls['toolkit_llm']} · embedded texts {calls['embedded_texts']}"
    )
    lines.append(f"wall time {report.wall_seconds:.1f} s")
    ready = report.sandbox.ready_seconds
    lines.append(
        f"sandbox   ready in {ready * 1000:.0f} ms · layers: {', '.join(report.sandbox.layers)}"
        if ready is not None
        else "sandbox   did not start"
    )
    for layer, reason in report.sandbox.missing_layers.items():
        lines.append(f"          not active: {layer} ({reason})")
    if report.write_errors:
        lines.append(f"write errors: {report.write_errors} (first: {report.write_error_examples[0]})")
    if report.violation:
        v = report.violation
        lines.append(f"VIOLATION during {v.phase}: [{v.kind}] {v.message} -> the program scores 0")
        if v.traceback:
            lines.append(v.traceback.rstrip())
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mstar-ray", description="Search for LLM-agent memory programs (M*).")
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check", help="check a memory program against the contract")
    check.add_argument("program", help="path to the program's .py file")
    check.set_defaults(handler=cmd_check)

    ev = commands.add_parser("eval", help="evaluate one memory program on a task with the offline backend")
    ev.add_argument("program", help="path to the program's .py file")
    ev.add_argument("--task", choices=["locomo", "synthetic"], default="synthetic")
    ev.add_argument("--limit", type=int, default=None, help="at most N questions, spread over categories")
    ev.add_argument("--conversation", type=int, default=0, help="LoCoMo conversation index (0-based)")
    ev.add_argument("--data", default=None, help="path to locomo10.json (else $MSTAR_LOCOMO_PATH, caches)")
    ev.add_argument("--seed", type=int, default=0, help="seed of the synthetic task")
    ev.add_argument("--call-timeout", type=float, default=60.0, help="wall deadline of one write/read in seconds")
    ev.add_argument("--json", action="store_true", help="print the full report as JSON")
    ev.add_argument("--backend", choices=["offline", "llm"], default="offline",
                    help="offline: deterministic, no network; llm: an OpenAI-compatible endpoint")
    ev.add_argument("--llm-url", help="base URL of the endpoint, e.g. http://127.0.0.1:8080/v1")
    ev.add_argument("--llm-model", help="model name at that endpoint")
    ev.add_argument("--llm-key-env", default=None, help="NAME of the environment variable holding the key")
    ev.add_argument("--llm-max-tokens", type=int, default=256)
    ev.add_argument("--llm-timeout", type=float, default=60.0, help="seconds per request")
    ev.set_defaults(handler=cmd_eval)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ContractError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_PROGRAM
    except EndpointError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ENDPOINT
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
