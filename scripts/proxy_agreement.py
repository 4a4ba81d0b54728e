"""Does the offline task agent rank memory programs the way a real model does? Programs in a folder, their scores
under a real model in a file, each program evaluated here on a task, and the two rankings set against each other.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/proxy_agreement.py PROGRAMS_DIR SCORES.json
        [--task locomo] [--conversations 0-7] [--limit N] [--texts N] [--data PATH] [--granularity session|turn]
        [--pooled STATIC [--draws D]] [--backend offline|llm --llm-url URL --llm-model NAME]
        [--embedder minilm|hashing] [--cache FILE.sqlite] [--json OUT.json]

PROGRAMS_DIR holds one ``<id>.py`` per program; SCORES.json maps each id to its score under the real model
(``{"id": 0.25, ...}``). Every program with a score is evaluated with the protocol of ``mstar-ray eval`` on each
conversation (``--limit`` questions spread over categories, ``--texts`` texts written: the two options bound the
work), and the script prints, per conversation and for the mean over conversations, Spearman's rho and Kendall's
tau-b between the two scores, then every program's pair. A program that fails in the sandbox scores what its
answers scored (0 where it never answered) and is marked. A LoCoMo ``--limit`` keeps the first questions of each
category, which LoCoMo lists in session order: they ask about the first sessions only, which flatters a program
that reads only the start of a conversation. Figures meant to stand for a model's score use every question.

``--pooled STATIC`` measures the way the scores to compare with were made when they come from the M* reference's
search (its ``SplitValidation``, run with ``--eval-static-size 60 --eval-train-ratio 2``): one knowledge base
holding every chosen conversation, STATIC questions (one per k-means cluster of all their questions) and twice
as many sessions, chosen by facility location to cover those questions and written in the order it picks
them, most-covering first. A program that reads only its first items reads the sessions that matter there,
not the first of a conversation. Each of ``--draws`` k-means seeds is one measurement.

The M* reference's LoCoMo search (its programs and their token F1 with GPT-5.4-mini) is one such set. Its code
stays outside this repository; to measure on it, fetch the repository yourself and let the script extract it:

    git clone --depth 1 https://github.com/wbopan/mstar /tmp/mstar    # or any snapshot of it
    .venv/bin/python scripts/proxy_agreement.py /tmp/mstar-locomo --from-runs-js /tmp/mstar/demo/assets/data/runs.js

``--from-runs-js FILE`` reads ``window.TREE_DATA`` (each run's nodes: id, score) and ``window.CODE_MAP`` (each
node's source, a JavaScript template literal) from the file, writes ``<id>.py`` for every node of the run
``--run`` (default ``locomo``) that has code and ``scores.json`` into PROGRAMS_DIR, and then measures on them
(SCORES defaults to PROGRAMS_DIR/scores.json). ``--extract-only`` stops after writing them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.actors.wiring import RoleClients, probe_endpoints  # noqa: E402
from mstar_ray.agent.evaluation import evaluate  # noqa: E402
from mstar_ray.llm.cache import SqliteCache  # noqa: E402
from mstar_ray.llm.endpoint import EndpointConfig  # noqa: E402
from mstar_ray.llm.settings import LLMSettings  # noqa: E402
from mstar_ray.tasks.model import Task  # noqa: E402
from mstar_ray.families.task_registry import load_task  # noqa: E402
from scripts.rank_agreement import spearman  # noqa: E402
from scripts.seed_table import conversation_range  # noqa: E402


def kendall_tau_b(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b: (concordant - discordant) pairs over the pairs not tied in each variable."""
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif dx == dy:
                concordant += 1
            else:
                discordant += 1
    denominator = np.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    return float((concordant - discordant) / denominator) if denominator else float("nan")


_TEMPLATE_ENTRY = re.compile(r'"([^"\n]+)"\s*:\s*`')


def _template_literal(text: str, start: int) -> tuple[str, int]:
    """The Python source held in the template literal whose body starts at ``start``, and the index after it.

    The file holds the source as written, with only its backticks escaped (``\\s`` and ``"\\n"`` stand for
    themselves, as in Python), so the one escape undone is ``\\```; evaluating the literal as JavaScript would
    drop the backslash of every regex escape."""
    out: list[str] = []
    i = start
    while i < len(text):
        ch = text[i]
        if text.startswith("\\`", i):
            out.append("`")
            i += 2
            continue
        if ch == "`":
            return "".join(out), i + 1
        if ch == "$" and text.startswith("${", i):
            raise ValueError(f"a template literal with a ${{...}} substitution at offset {i}: not plain source")
        out.append(ch)
        i += 1
    raise ValueError("a template literal is not closed")


def read_runs_js(path: Path, run: str) -> tuple[dict[str, str], dict[str, float]]:
    """(sources, scores) of the nodes of ``run`` in a runs.js file (``window.TREE_DATA`` / ``window.CODE_MAP``)."""
    text = path.read_text(encoding="utf-8")
    tree_at, code_at = text.find("window.TREE_DATA"), text.find("window.CODE_MAP")
    if tree_at < 0 or code_at < 0:
        raise ValueError(f"{path}: no window.TREE_DATA or window.CODE_MAP")
    tree_src = text[text.index("=", tree_at) + 1:code_at].strip().rstrip(";")
    tree_src = re.sub(r",(\s*[}\]])", r"\1", tree_src)  # JavaScript allows trailing commas, JSON does not
    tree = json.loads(tree_src)
    if run not in tree:
        raise ValueError(f"{path}: no run {run!r} in TREE_DATA (runs: {', '.join(tree)})")
    scores = {node["id"]: float(node["score"]) for node in tree[run]["nodes"]}
    sources: dict[str, str] = {}
    position = code_at
    while (match := _TEMPLATE_ENTRY.search(text, position)) is not None:
        body, position = _template_literal(text, match.end())
        if match.group(1) in scores:
            sources[match.group(1)] = body
    return sources, {k: v for k, v in scores.items() if k in sources}


def extract_runs_js(path: Path, run: str, out_dir: Path) -> Path:
    sources, scores = read_runs_js(path, run)
    out_dir.mkdir(parents=True, exist_ok=True)
    for program_id, source in sources.items():
        (out_dir / f"{program_id}.py").write_text(source, encoding="utf-8")
    scores_path = out_dir / "scores.json"
    scores_path.write_text(json.dumps(scores, indent=1), encoding="utf-8")
    print(f"wrote {len(sources)} programs of run {run!r} and {scores_path}", file=sys.stderr)
    return scores_path


def load_programs(folder: Path, scores_path: Path) -> tuple[dict[str, str], dict[str, float]]:
    try:
        scores = {str(k): float(v) for k, v in json.loads(scores_path.read_text(encoding="utf-8")).items()}
    except (OSError, ValueError, AttributeError) as error:
        raise SystemExit(f"{scores_path}: not a JSON object of program id -> score ({error})") from None
    missing = [k for k in scores if not (folder / f"{k}.py").is_file()]
    if missing:
        raise SystemExit(f"{scores_path}: no program file in {folder} for {', '.join(missing[:5])}")
    if len(scores) < 3:
        raise SystemExit(f"{scores_path}: at least 3 scored programs are needed for a rank correlation")
    return {k: (folder / f"{k}.py").read_text(encoding="utf-8") for k in scores}, scores


def measurements(args: argparse.Namespace, conversations: list, embedder) -> Iterator[tuple[str, Task]]:
    """(label, task) for each measurement: one per conversation, or with ``--pooled`` one per draw of the
    M* reference's protocol over all the conversations."""
    tasks = []
    for conversation in conversations:
        options = {"conversation": conversation} if conversation is not None else {}
        if args.granularity:
            options["granularity"] = args.granularity
        task = load_task(args.task, limit=args.limit, data=args.data, **options)
        if args.texts is not None and args.texts < len(task.texts):
            from mstar_ray.search.split import covering_texts

            task = task.model_copy(update={"texts": covering_texts(task, task.items, embedder, args.texts)})
        if args.pooled:
            tasks.append(task)
        else:
            yield (str(conversation) if conversation is not None else args.task), task
    if args.pooled:
        yield from pooled_draws(tasks, args.pooled, args.draws, embedder)


def pooled_draws(tasks: list[Task], static_size: int, draws: int, embedder) -> Iterator[tuple[str, Task]]:
    """The reference's static protocol (``SplitValidation``, run with ``--eval-static-size 60
    --eval-train-ratio 2``): every conversation's sessions in one knowledge base; ``static_size`` questions,
    one per k-means cluster of the questions; twice as many texts, chosen by facility location to cover them
    and written in the order it picks them. One draw per k-means seed."""
    from mstar_ray.search.subsets import facility_location, representative_set, training_budget

    texts, items = [], []
    for n, task in enumerate(tasks):
        # Conversations reuse text and turn ids ("S1", "D1:3"): each keeps its own under a prefix.
        texts += [t.model_copy(update={"id": f"c{n}/{t.id}", "units": [u.model_copy(update={"id": f"c{n}/{u.id}"})
                                                                           for u in t.units]}) for t in task.texts]
        items += [q.model_copy(update={"evidence": [f"c{n}/{e}" for e in q.evidence]}) for q in task.items]
    pooled = tasks[0].model_copy(update={"name": "pooled", "texts": texts, "items": items})
    question_vectors = np.asarray(embedder.embed([q.question for q in items]), dtype=np.float64)
    text_vectors = np.asarray(embedder.embed([t.text for t in texts]), dtype=np.float64)
    for draw in range(draws):
        chosen = representative_set(question_vectors, static_size, seed=draw)
        written = facility_location(question_vectors[chosen], text_vectors, training_budget(len(chosen), 2.0))
        yield f"draw {draw}", pooled.model_copy(update={"items": [items[i] for i in chosen],
                                                        "texts": [texts[i] for i in written]})


def llm_settings(args: argparse.Namespace) -> LLMSettings:
    settings = LLMSettings()
    if args.backend == "llm":
        if not args.llm_url or not args.llm_model:
            raise SystemExit("--backend llm needs --llm-url and --llm-model")
        settings = LLMSettings(task=EndpointConfig(base_url=args.llm_url, model=args.llm_model,
                                                   max_tokens=args.llm_max_tokens, timeout_s=args.llm_timeout))
    if args.embedder:
        settings = settings.model_copy(update={"embedding": settings.embedding.model_copy(update={"kind": args.embedder})})
    return settings


def fmt(value: float) -> str:
    return "  nan" if value != value else f"{value:+.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("programs", type=Path, help="folder of <id>.py programs")
    parser.add_argument("scores", type=Path, nargs="?", default=None,
                        help="JSON {id: score under the real model} (default: PROGRAMS/scores.json)")
    parser.add_argument("--from-runs-js", type=Path, default=None,
                        help="first extract the programs and scores of --run from this runs.js into PROGRAMS")
    parser.add_argument("--run", default="locomo", help="with --from-runs-js: which run of TREE_DATA")
    parser.add_argument("--extract-only", action="store_true", help="with --from-runs-js: stop after extracting")
    parser.add_argument("--task", default="locomo")
    parser.add_argument("--conversations", default="0", help="LoCoMo conversation indices, e.g. 0-7 or 3")
    parser.add_argument("--limit", type=int, default=None, help="at most N questions per conversation")
    parser.add_argument("--texts", type=int, default=None, help="write only the N texts that best cover the questions")
    parser.add_argument("--pooled", type=int, default=None, metavar="STATIC",
                        help="the reference's protocol: one knowledge base of every conversation, STATIC questions "
                             "(k-means) and twice as many texts covering them, written most-covering first")
    parser.add_argument("--draws", type=int, default=3, help="with --pooled: how many static sets (k-means seeds)")
    parser.add_argument("--data", default=None, help="locomo10.json (else the usual places)")
    parser.add_argument("--granularity", choices=("session", "turn"), default=None,
                        help="LoCoMo texts: one per session (the default) or one per turn (short prompts for a small model)")
    parser.add_argument("--backend", choices=("offline", "llm"), default="offline")
    parser.add_argument("--llm-url", default=None)
    parser.add_argument("--llm-model", default=None)
    parser.add_argument("--llm-max-tokens", type=int, default=256)
    parser.add_argument("--llm-timeout", type=float, default=None)
    parser.add_argument("--embedder", choices=("minilm", "openai", "hashing"), default=None,
                        help="the programs' embedding model (default: the settings' default, all-MiniLM-L6-v2)")
    parser.add_argument("--cache", default=None, help="SQLite file keeping embeddings (and LLM replies) between runs")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure to this file")
    args = parser.parse_args()
    if args.pooled is not None and args.pooled < 1 or args.draws < 1:
        parser.error("--pooled and --draws take a positive number")

    if args.from_runs_js is not None:
        scores_path = extract_runs_js(args.from_runs_js, args.run, args.programs)
        if args.extract_only:
            return 0
        args.scores = args.scores or scores_path
    sources, real = load_programs(args.programs, args.scores or args.programs / "scores.json")
    settings = probe_endpoints(llm_settings(args))
    roles = RoleClients(settings, cache=SqliteCache(args.cache) if args.cache else None)
    backend, embedder = roles.backend(), roles.embedder()
    ids = list(real)
    conversations = conversation_range(args.conversations) if args.task in ("locomo", "beam") else [None]

    per_conv: dict[str, dict[str, float]] = {}
    failures: dict[str, list[str]] = {}
    started = time.monotonic()
    for label, task in measurements(args, conversations, embedder):
        per_conv[label] = {}
        for program_id in ids:
            report = evaluate(sources[program_id], task, backend, embedder)
            per_conv[label][program_id] = report.score
            errors = sum(1 for r in report.results if r.error)
            if report.violation or errors:
                what = report.violation.kind if report.violation else f"{errors} of {len(report.results)} items failed"
                failures.setdefault(program_id, []).append(f"{label}: {what}")
        offline = [per_conv[label][k] for k in ids]
        truth = [real[k] for k in ids]
        print(f"[{time.monotonic() - started:6.0f} s] {args.task} {label}: {len(task.items)} questions, "
              f"{len(task.texts)} texts; rho {fmt(spearman(offline, truth))} tau {fmt(kendall_tau_b(offline, truth))}",
              file=sys.stderr, flush=True)

    mean = {k: float(np.mean([per_conv[c][k] for c in per_conv])) for k in ids}
    truth = [real[k] for k in ids]
    agent = f"{backend.name} (a rule-based stand-in for a model)" if args.backend == "offline" else \
        f"{args.llm_model} at {args.llm_url}"
    print(f"\nAgreement of {agent} with the given scores, {len(ids)} programs, {args.task} "
          f"conversations {args.conversations}, limit {args.limit}, texts {args.texts}"
          + (f", pooled: {args.pooled} questions and {2 * args.pooled} texts a draw" if args.pooled else "") + "\n")
    print(f"| {'draw' if args.pooled else 'conversation'} | Spearman rho | Kendall tau |\n|---|---|---|")
    for label, scores in per_conv.items():
        xs = [scores[k] for k in ids]
        print(f"| {label} | {fmt(spearman(xs, truth))} | {fmt(kendall_tau_b(xs, truth))} |")
    xs = [mean[k] for k in ids]
    rho, tau = spearman(xs, truth), kendall_tau_b(xs, truth)
    print(f"| mean score | **{fmt(rho)}** | **{fmt(tau)}** |\n")
    print("| program | given | here (mean) | " + " | ".join(per_conv) + " |")
    print("|---|---|---|" + "---|" * len(per_conv))
    for k in sorted(ids, key=lambda k: -real[k]):
        mark = " (failed: " + ", ".join(failures[k]) + ")" if k in failures else ""
        print(f"| {k}{mark} | {real[k]:.3f} | {mean[k]:.3f} | " + " | ".join(f"{per_conv[c][k]:.3f}" for c in per_conv) + " |")
    if args.json:
        args.json.write_text(json.dumps({"agent": agent, "spearman": rho, "kendall": tau, "given": real, "mean": mean,
                                         "per_conversation": per_conv, "failures": failures}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
