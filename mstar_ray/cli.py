"""``mstar-ray``: check a memory program, or evaluate one on a task.

Exit codes: ``mstar_ray.exit_codes``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, TextIO, TypeVar

from mstar_ray.contract import ContractError, check_source
from mstar_ray.envs.base import EnvFailure
from mstar_ray.exit_codes import (EXIT_BUDGET, EXIT_ENDPOINT, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, EXIT_PROGRAM, EXIT_SIGINT,
                                  EXIT_SIGTERM, ANNOUNCED, InfrastructureError, InputError, MissingInput, Terminated,
                                  exit_codes_text, resume_line)
from mstar_ray.llm.errors import BudgetExceeded
from mstar_ray.sandbox_host.jail import LAYERS
from mstar_ray.terminal import printable

if TYPE_CHECKING:
    from mstar_ray.inspect.server import PageServer
    from mstar_ray.llm.governor import UsageSnapshot
    from mstar_ray.llm.settings import LLMSettings
    from mstar_ray.results import EvalProgress, EvalReport


def _read_program(path: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise MissingInput(f"program file not found: {path}")
    return file.read_text(encoding="utf-8")


def cmd_check(args: argparse.Namespace) -> int:
    source = _read_program(args.program)
    violations = check_source(source)
    for violation in violations:
        print(printable(f"{args.program}:{violation}"))
    if violations:
        print(f"{len(violations)} contract violation(s)", file=sys.stderr)
        return EXIT_PROGRAM
    print(f"{args.program}: ok")
    return EXIT_OK


def cmd_seeds(args: argparse.Namespace) -> int:
    from mstar_ray import seeds as library

    if args.name:
        print(library.entry(args.name).path.read_text(encoding="utf-8"), end="")
        return EXIT_OK
    width = max(len(seed.name) for seed in library.LIBRARY) + 2
    print(f"{'name':<{width}}{'source':<31}idea")
    for seed in library.LIBRARY:
        mark = "*" if seed.name in library.PAPER_SEEDS else ""
        print(f"{seed.name + mark:<{width}}{seed.source:<31}{seed.idea}")
    print("\n* the default population (search.seeds when a config names none)")
    for name, why in library.NOT_SEEDABLE.items():
        print(f"no seed for {name}: {why}")
    print(f"programs in {library.PROGRAMS}; `mstar-ray seeds NAME` prints one")
    return EXIT_OK


def cmd_eval(args: argparse.Namespace) -> int:
    # Imported here so that `mstar-ray check` stays instant.
    from mstar_ray.agent.evaluation import evaluate
    from mstar_ray.llm.cache import SqliteCache
    from mstar_ray.actors.wiring import RoleClients, fitted_evaluation, probe_endpoints
    from mstar_ray.results import EvalConcurrency
    from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
    from mstar_ray.families.task_registry import load_task

    source = _read_program(args.program)
    violations = check_source(source)
    if violations:  # said here, naming the user's file, before a task is loaded
        raise ContractError(violations, args.program)
    settings = _llm_settings(args)
    task = load_task(
        args.task, conversation=args.conversation, limit=args.limit, data=args.data, seed=args.seed, size=args.size,
    )
    if args.texts is not None and args.texts < 1:
        raise InputError(f"--texts must be at least 1, got {args.texts}")
    settings = probe_endpoints(settings)
    roles = RoleClients(settings, cache=SqliteCache(args.cache) if args.cache else None)
    embedder = roles.embedder()
    if args.texts is not None and args.texts < len(task.texts):
        from mstar_ray.search.split import covering_texts

        chosen = covering_texts(task, task.items, embedder, args.texts)
        print(f"writing {len(chosen)} of {len(task.texts)} texts: those holding the evidence of the {len(task.items)} "
              f"questions asked, and those that best cover them ({embedder.name} embeddings), as the search chooses "
              "its training texts",
              file=sys.stderr)
        task = task.model_copy(update={"texts": chosen})
    limits = SandboxLimits(call_timeout_s=args.call_timeout,
                           require=[layer for layer in LAYERS if layer not in args.allow_missing])
    # the offline agent (no task endpoint) keeps evaluate's own default, the serial protocol
    concurrency = fitted_evaluation(EvalConcurrency(), settings) if settings.task is not None else None
    report = evaluate(source, task, roles.backend(), embedder, limits=limits, judge=roles.client("judge"),
                      attribute=args.attribute, concurrency=concurrency,
                      progress=ProgressPrinter(sys.stderr))
    if args.json:
        import json

        # ASCII-only JSON: a candidate's C1 controls and bidirectional overrides arrive as \u escapes.
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        print(printable(_format_report(args.program, report)))
        print(_format_usage(report, roles.gateway.snapshot(), args.cache))
    return EXIT_PROGRAM if report.violation else EXIT_OK


class ProgressPrinter:
    """``evaluate``'s progress on stderr: a line when a phase starts and ends, and every ``every_s`` seconds
    between, with the rate and the evaluation's own time left (``EvalProgress.eta_s``)."""

    def __init__(self, stream: TextIO, every_s: float = 10.0) -> None:
        import time

        self.stream, self.every_s, self.clock = stream, every_s, time.monotonic
        self.phase, self.printed = "", 0.0

    def __call__(self, progress: EvalProgress) -> None:
        if progress.finished:
            return
        if progress.items_done:
            phase, done, total, elapsed = ("evaluating items", progress.items_done, progress.items_total,
                                           progress.read_s)
        else:
            phase, done, total, elapsed = "writing texts", progress.texts_done, progress.texts_total, progress.write_s
        now = self.clock()
        if phase == self.phase and done < total and now - self.printed < self.every_s:
            return
        self.phase, self.printed = phase, now
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = progress.eta_s()
        left = f", about {eta / 60:.1f} min left" if eta and done < total else ""
        print(f"{phase} {done}/{total} ({elapsed:.0f} s, {rate:.2f}/s{left})", file=self.stream, flush=True)


def cmd_sandbox(args: argparse.Namespace) -> int:
    from mstar_ray.sandbox_host.process import check_layers
    from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits

    report = check_layers(SandboxLimits(require=[layer for layer in LAYERS if layer not in args.allow_missing]))
    print("layers: " + ", ".join(report["layers"]))
    for layer, reason in report["missing"].items():
        print(f"not active: {layer} ({reason})")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    import time

    from mstar_ray.driver.run import run_search

    if args.resume:
        from mstar_ray.runlog.layout import require_run_dir

        run_dir = args.resume
        require_run_dir(run_dir)
        _serve_run(args, run_dir)
        code = run_search(args.config, run_dir=run_dir, address=args.address, resume=True)
    else:
        if args.config is None:
            raise InputError("give a config file (or --resume RUN_DIR)")
        run_dir = args.run_dir = args.run_dir or f"runs/{Path(args.config).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        if (Path(run_dir) / "config.yaml").exists():
            raise InputError(f"{run_dir} already holds a run: resume it with --resume {run_dir}, or choose another --run-dir")
        _serve_run(args, run_dir)
        code = run_search(args.config, run_dir=run_dir, address=args.address)
    if code == EXIT_OK:
        from mstar_ray.inspect.summary import run_summary_text, summary_of

        summary = summary_of(Path(run_dir))
        print(json.dumps(summary, indent=1) if args.json else run_summary_text(Path(run_dir), summary))
    return code


def _serve_run(args: argparse.Namespace, run_dir: str) -> None:
    """``run --serve``: the live page of this run, served from this process while it runs."""
    if not args.serve:
        return
    from mstar_ray.inspect.server import start

    server = _started(start, Path(run_dir), args.serve_host, args.serve_port, None)
    print(f"live page {server.url} (while this run lasts)", file=sys.stderr, flush=True)


def _started(start: Callable[[Path, str, int, str | None], PageServer], run_dir: Path, host: str, port: int,
             token: str | None) -> PageServer:
    try:
        return start(run_dir, host, port, token)
    except OSError as exc:  # the port is taken, the address is not this machine's
        raise InputError(f"cannot serve the page on {host}:{port}: {exc.strerror or exc}") from None


def cmd_serve(args: argparse.Namespace) -> int:
    import time

    from mstar_ray.inspect.server import start
    from mstar_ray.inspect.status import run_config_of

    run_dir = Path(args.run_dir)
    run_config_of(run_dir)  # "not a run directory" before anything is bound
    server = _started(start, run_dir, args.host, args.port, args.token)
    print(f"serving {run_dir} at {server.url} (Ctrl-C stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()
        return EXIT_OK


def cmd_ablate(args: argparse.Namespace) -> int:
    import time

    from mstar_ray.driver.ablate import run_ablation

    out = args.out or f"runs/ablate-{Path(args.config).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    variants = [v.strip() for v in args.variants.split(",")] if args.variants else None
    return run_ablation(args.config, out=out, repeats=args.repeats, variants=variants, address=args.address)


def cmd_transfer(args: argparse.Namespace) -> int:
    import time

    from mstar_ray.search_loop.policy import FatalRunError
    from mstar_ray.driver.transfer import run_transfer

    out = args.out or f"runs/transfer-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        code = run_transfer(args.run_dirs, args.tasks, out, args.address)
    except FatalRunError as exc:
        print(printable(f"error: {exc}"), file=sys.stderr)
        return EXIT_ENDPOINT
    from mstar_ray.inspect.summary import transfer_text

    print(transfer_text(Path(out), args.run_dirs, as_json=args.json))
    return code


def cmd_supervise(args: argparse.Namespace) -> int:
    from mstar_ray.llm.cache import SqliteCache
    from mstar_ray.supervise.command import history, run_supervise

    if not 0 <= args.train_share < 1:
        raise InputError(f"--train-share must be in [0, 1), got {args.train_share}")
    from mstar_ray.families.task_registry import options_model

    # --seed is the planner's; the task's too where the task has one (its draw of texts)
    task_seed = {"seed": args.seed} if args.task and "seed" in options_model(args.task).model_fields else {}
    texts, source = history(args.task, args.data, conversation=args.conversation, **task_seed)
    return run_supervise(texts, source, _llm_settings(args), args.out, bundles=args.bundles, seed=args.seed,
                         train_share=args.train_share, cache=SqliteCache(args.cache) if args.cache else None)


def cmd_status(args: argparse.Namespace) -> int:
    from mstar_ray.inspect.status import status_text

    print(printable(status_text(Path(args.run_dir))))
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from mstar_ray.inspect.status import best_source

    program_id, source, score = best_source(Path(args.run_dir))
    Path(args.best).write_text(source, encoding="utf-8")
    print(f"{args.best}: program {program_id}, static score {score:.3f}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from mstar_ray.inspect.report import build_report

    out = Path(args.out or Path(args.run_dir) / "report.html")
    out.write_text(build_report(Path(args.run_dir)), encoding="utf-8")
    print(f"report written to {out}")
    return EXIT_OK


def _llm_settings(args: argparse.Namespace) -> LLMSettings:
    """The ``llm`` settings from ``--llm-config``, else from the ``--llm-*`` flags; ``--embedder`` overrides."""
    from mstar_ray.config_file import load_yaml
    from mstar_ray.llm.endpoint import EndpointConfig
    from mstar_ray.llm.settings import LLMSettings

    if args.llm_config:
        settings = load_yaml(LLMSettings, args.llm_config)
    elif args.backend == "llm":
        if not args.llm_url or not args.llm_model:
            raise InputError("--backend llm needs --llm-url and --llm-model (or --llm-config FILE)")
        task = EndpointConfig(
            base_url=args.llm_url, model=args.llm_model, api_key_env=args.llm_key_env,
            max_tokens=args.llm_max_tokens, timeout_s=args.llm_timeout,
            **({"max_concurrency": args.llm_concurrency} if args.llm_concurrency is not None else {}),
        )
        settings = LLMSettings(task=task)
    else:
        settings = LLMSettings()
    if args.embedder:
        settings = settings.model_copy(update={"embedding": settings.embedding.model_copy(update={"kind": args.embedder})})
    return settings


def _format_usage(report: EvalReport, snapshot: UsageSnapshot, cache_path: str | None) -> str:
    lines = []
    if report.llm:
        lines.append(f"{'LLM step':<12}{'requests':>10}{'cached':>9}{'new':>7}{'retries':>9}{'tokens':>10}")
        for step, usage in sorted(report.llm.items()):
            lines.append(
                f"{step:<12}{usage.requests:>10}{usage.cache_hits:>9}{usage.new_calls:>7}{usage.retries:>9}"
                f"{usage.prompt_tokens + usage.completion_tokens:>10}"
            )
        total = snapshot.total
        lines.append(f"cost      ${total.cost_usd:.4f} for {total.tokens} tokens in {total.calls} paid calls")
    if report.embedding is not None:
        e = report.embedding
        lines.append(f"embedding {e.requests} texts, {e.cache_hits} from the cache, {e.new_calls} computed")
    if report.judge_score is not None:
        lines.append(f"LLM judge {report.judge_score:.3f} over {report.judged} judged answers")
    lines.append(f"cache     {cache_path}" if cache_path else "cache     in memory for this command (--cache FILE keeps it)")
    return "\n".join(lines)


def _format_report(program: str, report: EvalReport) -> str:
    nature = "no network, no key; deterministic" if report.backend == "offline" else "real model"
    lines = [
        f"program   {program}",
        f"task      {report.task} ({report.texts_written} texts written, {len(report.results)} items; "
        f"family {report.family}, scored by {report.metric})",
        f"backend   {report.backend} ({nature}) · embedder {report.embedder}",
        "",
    ]
    width = max([18, *(len(name) + 2 for name in report.categories)])
    lines.append(f"{'category':<{width}}{'n':>5}{'score':>9}")
    for name, category in report.categories.items():
        lines.append(f"{name:<{width}}{category.n:>5}{category.score:>9.3f}")
    lines.append(f"{'overall':<{width}}{len(report.results):>5}{report.score:>9.3f}")
    lines.append("")
    calls = report.calls
    lines.append("calls     " + " · ".join(f"{step.replace('_', ' ').replace('llm', 'LLM')} {n}" for step, n in calls.items()
                                          if n or step not in ("feedback",)))
    lines.append(f"wall time {report.wall_seconds:.1f} s")
    ready = report.sandbox.ready_seconds
    lines.append(
        f"sandbox   ready in {ready * 1000:.0f} ms · layers: {', '.join(report.sandbox.layers)}"
        if ready is not None
        else "sandbox   did not start"
    )
    for layer, reason in report.sandbox.missing_layers.items():
        lines.append(f"          not active: {layer} ({reason})")
    if report.stages is not None:
        totals: dict[str, int] = {}
        for counts in report.stages.values():
            for stage, n in counts.items():
                totals[stage] = totals.get(stage, 0) + n
        lines.append("failures  " + (" · ".join(f"{n} {stage.replace('_', ' ')}" for stage, n in sorted(totals.items()))
                                     or "none with evidence") + f" ({report.calls.get('oracle_read', 0)} oracle reads)")
        if report.attribution_stopped:
            lines.append(f"          attribution stopped: {report.attribution_stopped}")
    if report.write_errors:
        lines.append(f"write errors: {report.write_errors} (first: {report.write_error_examples[0]})")
    if report.violation:
        v = report.violation
        lines.append(f"VIOLATION during {v.phase}: [{v.kind}] {v.message} -> the program scores 0")
        if v.traceback:
            lines.append(v.traceback.rstrip())
    return "\n".join(lines)


def _layer_list(text: str) -> list[str]:
    layers = [t for t in text.split(",") if t]
    unknown = set(layers) - set(LAYERS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown layer(s) {', '.join(sorted(unknown))}; the layers are {', '.join(LAYERS)}")
    return layers


def _llm_arguments(command: argparse.ArgumentParser) -> None:
    """The model settings of a command that calls the task agent's model (read by ``_llm_settings``)."""
    from mstar_ray.llm.settings import EMBEDDER_KINDS

    command.add_argument("--backend", choices=["offline", "llm"], default="offline",
                         help="offline: deterministic, no network; llm: an OpenAI-compatible endpoint")
    command.add_argument("--llm-url", help="base URL of the endpoint, e.g. http://127.0.0.1:8080/v1")
    command.add_argument("--llm-concurrency", type=int, default=None,
                         help="requests in flight to it at once (default: 16, or 1 for a server on this machine)")
    command.add_argument("--llm-model", help="model name at that endpoint")
    command.add_argument("--llm-key-env", default=None, help="NAME of the environment variable holding the key")
    command.add_argument("--llm-max-tokens", type=int, default=256)
    command.add_argument("--llm-timeout", type=float, default=None,
                         help="seconds per request; default: chosen from the endpoint's speed measured at start-up")
    command.add_argument("--llm-config", default=None,
                         help="YAML of the llm settings: task/toolkit/judge endpoints, embedding, prices, budget")
    command.add_argument("--embedder", choices=EMBEDDER_KINDS, default=None,
                         help="override the embedding kind (default minilm: all-MiniLM-L6-v2 on this machine)")
    command.add_argument("--cache", default=None, help="SQLite file caching every LLM and embedding call")


def build_parser() -> argparse.ArgumentParser:
    from mstar_ray.search.variants import described as variants_described
    from mstar_ray.families.qa.beam import SIZES as BEAM_SIZES
    from mstar_ray.families.task_registry import TASK_NAMES

    parser = argparse.ArgumentParser(prog="mstar-ray", description="Search for LLM-agent memory programs (M*).",
                                     epilog=f"exit codes: {exit_codes_text()}")
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check", help="check a memory program against the contract")
    check.add_argument("program", help="path to the program's .py file")
    check.set_defaults(handler=cmd_check)

    seeds = commands.add_parser("seeds", help="list the seed library (names for search.seeds), or print one seed")
    seeds.add_argument("name", nargs="?", help="print this seed's program")
    seeds.set_defaults(handler=cmd_seeds)

    ev = commands.add_parser("eval", help="evaluate one memory program on a task")
    ev.add_argument("program", help="path to the program's .py file")
    ev.add_argument("--task", choices=TASK_NAMES, default="synthetic")
    ev.add_argument("--limit", type=int, default=None, help="at most N questions, spread over categories")
    ev.add_argument("--texts", type=int, default=None, metavar="N",
                    help="write only the N texts that best cover the questions asked (as the search chooses its "
                         "training texts); default: every text of the task")
    # The task options default to None, "not given": the task's own default applies, and one the task does not
    # read is refused (mstar_ray.families.task_options).
    ev.add_argument("--conversation", type=int, default=None, help="LoCoMo or BEAM conversation index (0-based; default 0)")
    ev.add_argument("--data", default=None, help="the task's data: a file or folder (mstar-ray run's task.data)")
    ev.add_argument("--size", default=None, choices=BEAM_SIZES, help="BEAM conversation size (default 100K)")
    ev.add_argument("--seed", type=int, default=None,
                    help="seed of the synthetic task; for healthbench and prbench, of the draw of training texts; "
                         "for episode tasks, of the games (default 0)")
    ev.add_argument("--call-timeout", type=float, default=60.0, help="wall deadline of one write/read in seconds")
    ev.add_argument("--json", action="store_true", help="print the full report as JSON")
    ev.add_argument("--attribute", action="store_true",
                    help="attribute each failed item with evidence to storage, retrieval or answering (oracle reads)")
    ev.add_argument("--allow-missing", type=_layer_list, default=[], metavar="LAYER[,LAYER]",
                    help=f"sandbox layers this machine may lack ({', '.join(LAYERS)}); by default the sandbox "
                    "refuses to run without any of them")
    _llm_arguments(ev)
    ev.set_defaults(handler=cmd_eval)

    sandbox = commands.add_parser("sandbox", help="start one sandbox here and report its layers; exit 3 when a "
                                  "required one is missing (a node's readiness check)")
    sandbox.add_argument("--allow-missing", type=_layer_list, default=[], metavar="LAYER[,LAYER]",
                         help="layers this machine may lack on purpose")
    sandbox.set_defaults(handler=cmd_sandbox)

    run = commands.add_parser("run", help="search for a better memory program (M*) on Ray")
    run.add_argument("config", nargs="?", help="run config YAML (see experiments/); with --resume, only its budget may differ")
    run.add_argument("--address", default=None, help="auto, or ray://HOST:PORT; default: a local Ray sized to this machine")
    run.add_argument("--run-dir", default=None, help="where the run's files go (default runs/CONFIG-TIMESTAMP)")
    run.add_argument("--resume", metavar="RUN_DIR", default=None,
                     help="continue an interrupted run: re-issue what was in flight, never redo finished work")
    run.add_argument("--json", action="store_true", help="print the run's summary.json instead of the short summary")
    run.add_argument("--serve", action="store_true", help="serve the run's live page while it runs (as mstar-ray "
                     "serve does) and print its URL")
    run.add_argument("--serve-host", default="127.0.0.1", help="address of --serve's page (default loopback; any "
                     "other address requires the token printed with the URL)")
    run.add_argument("--serve-port", type=int, default=8765, help="port of --serve's page (0: any free port)")
    run.set_defaults(handler=cmd_run)

    ablate = commands.add_parser("ablate", help="the ablation table (full, -Instruction, -Code, max-parent, no "
                                 "population) and a best-of-N baseline, each run REPEATS times on Ray")
    ablate.add_argument("config", help="run config YAML: the full search; every variant changes one switch of it")
    ablate.add_argument("--repeats", type=int, default=3, help="runs per variant, search seeds seed, seed+1, ...")
    ablate.add_argument("--variants", default=None, metavar="NAME[,NAME]",
                        help=f"comma-separated subset (default: all): {variants_described()}")
    ablate.add_argument("--out", default=None, help="a run directory per run and ablation.json go here "
                        "(default runs/ablate-CONFIG-TIMESTAMP); given again, finished runs are kept")
    ablate.add_argument("--address", default=None, help="auto, or ray://HOST:PORT; default: a local Ray per run")
    ablate.set_defaults(handler=cmd_ablate)

    transfer = commands.add_parser(
        "transfer", help="each run's returned program and the seeds on every run's task: the transfer matrix")
    transfer.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="finished runs; each gives a task (column)")
    transfer.add_argument("--tasks", nargs="*", default=[], metavar="CONFIG.yaml",
                          help="more columns: run configs whose task no run searched on, split as such a run would")
    transfer.add_argument("--out", default=None, help="where transfer.json and the evaluations' cache go "
                          "(default runs/transfer-TIMESTAMP); transfer.json is also written to every RUN_DIR")
    transfer.add_argument("--address", default=None, help="auto, or ray://HOST:PORT; default: a local Ray")
    transfer.add_argument("--json", action="store_true", help="print transfer.json instead of the table")
    transfer.set_defaults(handler=cmd_transfer)

    sup = commands.add_parser("supervise", help="questions with verified evidence from a history's texts alone "
                              "(MemSteer): a jsonl task to search on")
    sup.add_argument("--out", required=True, help="the directory the jsonl task and supervise.json go to")
    sup.add_argument("--task", choices=TASK_NAMES, default=None, help="take this task's texts (its questions are ignored)")
    sup.add_argument("--data", default=None, help="the task's data; without --task, a directory holding texts.jsonl")
    sup.add_argument("--conversation", type=int, default=None, help="LoCoMo or BEAM conversation index (0-based; default 0)")
    sup.add_argument("--bundles", type=int, default=40, help="bundles to plan a question from (at most one each)")
    sup.add_argument("--seed", type=int, default=0)
    sup.add_argument("--train-share", type=float, default=0.5,
                     help="share of the kept questions marked train (failure cases only); the rest score")
    _llm_arguments(sup)
    sup.set_defaults(handler=cmd_supervise)

    status = commands.add_parser("status", help="progress, best, cost and work in flight of a run, live or finished")
    status.add_argument("run_dir")
    status.set_defaults(handler=cmd_status)

    export = commands.add_parser("export", help="write the best program of a run to a file")
    export.add_argument("run_dir")
    export.add_argument("--best", required=True, metavar="OUT.py")
    export.set_defaults(handler=cmd_export)

    serve = commands.add_parser("serve", help="a web page of a run that follows it as it grows (live or finished)")
    serve.add_argument("run_dir")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback: this machine only); "
                       "any other address requires a token")
    serve.add_argument("--port", type=int, default=8765, help="port to listen on (0: any free port)")
    serve.add_argument("--token", default=None, help="the token a browser must present (default: drawn at random "
                       "when the address is not loopback, none on loopback)")
    serve.set_defaults(handler=cmd_serve)

    report = commands.add_parser("report", help="a self-contained HTML report with plots")
    report.add_argument("run_dir")
    report.add_argument("--out", default=None, help="default RUN_DIR/report.html")
    report.set_defaults(handler=cmd_report)
    for command in commands.choices.values():
        command.add_argument("--debug", action="store_true", help="on an internal error, print its traceback here")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Retries and back-off are reported on stderr as they happen.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    on_sigterm = None
    if threading.current_thread() is threading.main_thread():
        on_sigterm = signal.signal(signal.SIGTERM, _terminate)
        # A process manager or a Ray worker may start us with SIGINT blocked, and Ctrl-C would never arrive;
        # Ray's job supervisor unblocks it for its entrypoints the same way. An ignored SIGINT stays ignored.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        return _handled(args)
    finally:
        if on_sigterm is not None:  # main() is also called in-process (tests, scripts)
            signal.signal(signal.SIGTERM, on_sigterm)


def _handled(args: argparse.Namespace) -> int:
    """The command's exit code: the known failures by kind, anything else an internal error."""
    try:
        code: int = args.handler(args)  # argparse's Namespace holds what set_defaults put there: a cmd_* function
        return code
    except ContractError as exc:
        print(printable(exc), file=sys.stderr)
        return EXIT_PROGRAM
    except (InfrastructureError, EnvFailure) as exc:  # an endpoint, a sandbox layer, an environment
        print(printable(f"error: {exc}"), file=sys.stderr)
        return EXIT_ENDPOINT
    except BudgetExceeded as exc:
        print(f"stopped: {exc}", file=sys.stderr)
        return EXIT_BUDGET
    except InputError as exc:
        print(printable(f"error: {exc}"), file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
        return _interrupted(args, exc)
    except BrokenPipeError:
        # the reader went away (`mstar-ray status RUN | head`): not an error, and nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 -- anything else is a bug: said in one line, its traceback kept
        return _internal_error(args, exc)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"signal {signum}")


def _run_dir(args: argparse.Namespace) -> Path | None:
    """The directory a command writes its run into (``run``: ``--run-dir``, set by ``cmd_run`` when defaulted,
    or ``--resume``; ``transfer``: ``--out``), if it exists."""
    folder = getattr(args, "resume", None) or getattr(args, "run_dir", None) or getattr(args, "out", None)
    return Path(folder) if folder and Path(folder).is_dir() else None


def _interrupted(args: argparse.Namespace, exc: KeyboardInterrupt) -> int:
    """Work in flight is abandoned (Ray's workers go with the driver); what finished is in the run's logs."""
    what, code = ("SIGTERM", EXIT_SIGTERM) if isinstance(exc, Terminated) else ("Ctrl-C", EXIT_SIGINT)
    folder = _run_dir(args) if args.command == "run" else None
    if ANNOUNCED in getattr(exc, "__notes__", ()):
        pass  # the run said how to resume as soon as its logs were closed
    elif folder is not None and (folder / "config.yaml").is_file():
        print(resume_line(what, folder), file=sys.stderr)
    else:
        print(f"stopped by {what}", file=sys.stderr)
    return code


def _internal_error(args: argparse.Namespace, exc: Exception) -> int:
    """One line naming the component that failed (the innermost frame of mstar-ray's own code) and where the
    full traceback went: ``error.log`` in the run directory (else a temporary file), and stderr with --debug.
    Reporting never raises, and nothing on its way needs the working directory (no ``resolve()``, no ``cwd``): a
    driver's may have vanished under it (Ray's runtime-env clean-up removes a job's ``working_dir``), and then
    the report says so."""
    import datetime
    import traceback

    text = _or(lambda: "".join(traceback.format_exception(exc)), f"{type(exc).__name__} (no traceback)\n")
    component = _or(lambda: _component(exc), "mstar-ray")
    stamp = _or(lambda: datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "")
    log = _or(lambda: _keep_error(args, f"--- {stamp}: mstar-ray {' '.join(sys.argv[1:])}\n{text}\n"), None)
    summary = _or(lambda: (str(exc).strip().splitlines() or [""])[0][:300], "")
    print(f"internal error in {component}: {type(exc).__name__}: {summary}", file=sys.stderr)
    if not _or(lambda: os.path.isdir(os.getcwd()), False):
        print("the working directory no longer exists: it was removed while mstar-ray ran (on a Ray node, the "
              "runtime environment's clean-up removes a job's working_dir); paths relative to it cannot be used",
              file=sys.stderr)
    if getattr(args, "debug", False):
        print(text, file=sys.stderr, end="")
    elif log is None:
        print(f"the traceback could not be written to a file; it follows\n{text}", file=sys.stderr, end="")
    else:
        print(f"the full traceback is in {log} (--debug prints it here); please report it", file=sys.stderr)
    return EXIT_INTERNAL


_T = TypeVar("_T")
_F = TypeVar("_F")


def _or(step: Callable[[], _T], fallback: _F) -> _T | _F:
    """``step()``, or ``fallback`` if it raised: the error path goes on whatever one of its steps met."""
    try:
        return step()
    except Exception:  # noqa: BLE001 -- reporting one error must not end in another
        return fallback


def _component(exc: BaseException) -> str:
    """The module and function of the innermost frame in mstar-ray's own code, read from the frames' file names
    as they are (a frame's name may be relative, and resolving it would need the working directory)."""
    import traceback

    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        parts = frame.filename.replace(os.sep, "/").split("/")
        if "mstar_ray" in parts[:-1] and parts[-1].endswith(".py"):
            inside = parts[len(parts) - parts[::-1].index("mstar_ray") - 1:]
            module = ".".join([*inside[:-1], inside[-1][:-3]])
            return f"{module} ({frame.name}, line {frame.lineno})"
    return "mstar-ray"


def _keep_error(args: argparse.Namespace, record: str) -> Path:
    """The record appended to the run directory's ``error.log``, else to a new temporary file (when the run
    directory is gone, or is relative to a working directory that is)."""
    import tempfile

    folder = _or(lambda: _run_dir(args), None)
    if folder is not None:
        log = folder / "error.log"
        try:
            with log.open("a", encoding="utf-8") as sink:
                sink.write(record)
            return log
        except OSError:
            pass
    handle, name = tempfile.mkstemp(prefix="mstar-ray-error-", suffix=".log")
    with os.fdopen(handle, "w", encoding="utf-8") as sink:
        sink.write(record)
    return Path(name)


if __name__ == "__main__":
    sys.exit(main())
