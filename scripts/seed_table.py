"""Every seed of the library, offline, on LoCoMo conversations 0-7 and on the synthetic task: token F1 overall
and per category, wall time, calls, and how often the evidence reached the context.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/seed_table.py [--seeds a,b] [--conversations 0-7]
        [--data PATH] [--cache FILE.sqlite] [--json OUT.json]

Each seed is evaluated with the protocol of ``mstar-ray eval`` (offline task agent, all-MiniLM-L6-v2
embeddings, every text written, every question of categories 1-4 asked). LoCoMo figures pool the questions of
all conversations. "evidence" is the share of questions with evidence whose every evidence turn appears in the
read context (a retrieval proxy: a wrong answer with the evidence present failed at answering). A second table
measures MemRL's feedback: on every conversation, feedback on the even-numbered questions, F1 on the odd ones,
against the same odd questions without feedback. Wall times are one run on a shared machine: compare seeds
within a run, not across runs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mstar_ray import seeds as library
from mstar_ray.actors.wiring import RoleClients
from mstar_ray.agent.evaluation import evaluate
from mstar_ray.llm.cache import SqliteCache
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.results import EvalReport
from mstar_ray.families.qa.locomo import CATEGORY_NAMES, DEFAULT_CATEGORIES
from mstar_ray.tasks.model import Task
from mstar_ray.families.task_registry import load_task

LOCOMO_CATEGORIES = [CATEGORY_NAMES[c] for c in DEFAULT_CATEGORIES]


def conversation_range(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def evidence_reached(report: EvalReport, task: Task) -> tuple[int, int]:
    """(questions whose evidence all reached the context, questions with evidence). A piece of evidence reached
    the context when the first 80 characters of its turn ("Speaker: words") appear in it."""
    bodies = {unit.id: t.text[unit.start:unit.end][:80] for t in task.texts for unit in t.units}
    evidence = {q.id: q.evidence for q in task.items}
    with_evidence = [r for r in report.results if evidence.get(r.id)]
    reached = sum(all(bodies[e] in r.context for e in evidence[r.id]) for r in with_evidence)
    return reached, len(with_evidence)


class Tally:
    """Pooled figures of one seed over several tasks."""

    def __init__(self) -> None:
        self.scores: dict[str, list[float]] = {}
        self.all: list[float] = []
        self.seconds = 0.0
        self.calls: dict[str, int] = {}
        self.reached = self.with_evidence = 0
        self.violations: list[str] = []

    def add(self, report: EvalReport, task: Task) -> None:
        for result in report.results:
            self.scores.setdefault(result.category, []).append(result.score)
            self.all.append(result.score)
        self.seconds += report.wall_seconds
        for key, value in report.calls.items():
            self.calls[key] = self.calls.get(key, 0) + value
        reached, with_evidence = evidence_reached(report, task)
        self.reached += reached
        self.with_evidence += with_evidence
        if report.violation:
            self.violations.append(f"{task.name}: {report.violation.phase} [{report.violation.kind}]")

    def row(self, categories: list[str]) -> dict:
        mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
        return {
            "f1": mean(self.all), "n": len(self.all),
            "categories": {c: mean(self.scores.get(c, [])) for c in categories},
            "wall_s": round(self.seconds, 1), "calls": self.calls,
            "evidence": self.reached / self.with_evidence if self.with_evidence else None,
            "violations": self.violations,
        }


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default=",".join(s.name for s in library.LIBRARY))
    parser.add_argument("--conversations", default="0-7", help="LoCoMo conversation indices, e.g. 0-7 or 3")
    parser.add_argument("--data", default=None, help="locomo10.json (else the usual places)")
    parser.add_argument("--cache", default=None, help="SQLite file keeping embeddings between runs")
    parser.add_argument("--json", default=None, help="also write every figure to this file")
    args = parser.parse_args()

    roles = RoleClients(LLMSettings(), cache=SqliteCache(args.cache) if args.cache else None)
    backend, embedder = roles.backend(), roles.embedder()
    locomo = [load_task("locomo", conversation=i, data=args.data) for i in conversation_range(args.conversations)]
    synthetic = load_task("synthetic", seed=0)
    seeds = args.seeds.split(",")
    figures: dict[str, dict] = {"locomo": {}, "synthetic": {}, "feedback": {}}
    started = time.monotonic()
    memrl_reports = []
    for name in seeds:
        source = library.entry(name).path.read_text(encoding="utf-8")
        tally = Tally()
        for task in locomo:
            report = evaluate(source, task, backend, embedder)
            tally.add(report, task)
            if name == "memrl":
                memrl_reports.append(report)
        figures["locomo"][name] = tally.row(LOCOMO_CATEGORIES)
        synthetic_tally = Tally()
        synthetic_tally.add(evaluate(source, synthetic, backend, embedder), synthetic)
        figures["synthetic"][name] = synthetic_tally.row(sorted({q.category for q in synthetic.items}))
        print(f"[{time.monotonic() - started:7.0f} s] {name}: LoCoMo {fmt(tally.row([])['f1'])}", flush=True)
    if "memrl" in seeds:
        source = library.entry("memrl").path.read_text(encoding="utf-8")
        with_feedback, without = [], []
        for task, plain in zip(locomo, memrl_reports):  # the offline protocol is deterministic: reuse the run above
            taught = [q.id for q in task.items[0::2]]
            asked = {q.id for q in task.items[1::2]}
            taught_report = evaluate(source, task, backend, embedder, feedback_ids=taught)
            with_feedback += [r.score for r in taught_report.results if r.id in asked]
            without += [r.score for r in plain.results if r.id in asked]
        figures["feedback"]["memrl"] = {"n": len(without), "without": sum(without) / len(without),
                                        "with": sum(with_feedback) / len(with_feedback)}

    cats = LOCOMO_CATEGORIES
    print(f"\nLoCoMo conversations {args.conversations} (offline, pooled questions), and the synthetic task (seed 0)\n")
    print("| seed | LoCoMo F1 | " + " | ".join(cats) + " | evidence | wall s | toolkit LLM | embedded | "
          "synthetic F1 | synth. wall s | violations |")
    print("|" + "---|" * (len(cats) + 9))
    for name in seeds:
        row, synth = figures["locomo"][name], figures["synthetic"][name]
        print(f"| {name} | {fmt(row['f1'])} | " + " | ".join(fmt(row["categories"][c]) for c in cats)
              + f" | {fmt(row['evidence'])} | {row['wall_s']:.0f} | {row['calls'].get('toolkit_llm', 0)} | "
              f"{row['calls'].get('embedded_texts', 0)} | {fmt(synth['f1'])} | {synth['wall_s']:.1f} | "
              f"{len(row['violations']) + len(synth['violations'])} |")
    questions = figures["locomo"][seeds[0]]["n"] if seeds else 0
    print(f"\n{questions} LoCoMo questions, {len(synthetic.items)} synthetic; calls per seed on LoCoMo: "
          f"extract {figures['locomo'][seeds[0]]['calls'].get('extract', 0)}, query/answer {questions} each")
    if figures["feedback"]:
        fb = figures["feedback"]["memrl"]
        print(f"\nMemRL feedback: F1 on the {fb['n']} odd-numbered LoCoMo questions, "
              f"without feedback {fb['without']:.3f}, after feedback on the even-numbered ones {fb['with']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
