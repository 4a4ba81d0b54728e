"""Failure attribution on LoCoMo with the offline backend: the stage counts of each seed per category, and how
often the "reached the context" decision is right on a hand-checked sample.

    .venv/bin/python scripts/attribution_check.py [--conversations 0-7] [--limit 40]        # the stage table
    .venv/bin/python scripts/attribution_check.py --sample 60 > to_check.txt                # decisions to label
    .venv/bin/python scripts/attribution_check.py --labels scripts/attribution_labels.json  # accuracy

A sample is drawn (seeded) half from evidence units decided reached and half from units decided missing, among
the failed items of every seed; each shows the unit's words and the context. The labels file holds only ids,
the hand-given verdicts (``reached`` true or false) and a digest of the material each verdict was given on
(the unit's words and the context), never LoCoMo's text (CC BY-NC): the texts are rebuilt from
``../shared/data/locomo10.json``. A verdict holds for its material only: when a seed or the offline backend
changes what reaches a context, that label is stale (counted, not compared) until the sample is checked again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections import Counter
from pathlib import Path

from mstar_ray import text as tx
from mstar_ray.agent.attribution import STAGES, reached
from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.seeds import PAPER_SEEDS, entry
from mstar_ray.families.task_registry import load_task

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.json"


def conversations(text: str) -> list[int]:
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def evaluations(args) -> list[tuple[int, str, object, object]]:
    """(conversation, seed, task, report) for every seed on every conversation, attributed."""
    done = []
    for conversation in conversations(args.conversations):
        task = load_task("locomo", conversation=conversation, data=str(args.data), limit=args.limit)
        for seed in PAPER_SEEDS:
            report = evaluate(entry(seed).path.read_text(), task, OfflineBackend(), HashingEmbedder(), attribute=True)
            done.append((conversation, seed, task, report))
            print(f"conversation {conversation} {seed}: score {report.score:.3f}", file=sys.stderr)
    return done


def decisions(done) -> list[dict]:
    """Every (failed item, evidence unit) whose unit was written: the decision and what it was made on."""
    found = []
    for conversation, seed, task, report in done:
        evidence = task.evidence()
        items = {item.id: item for item in task.items}
        for result in report.results:
            if result.stage is None:
                continue
            for unit in items[result.id].evidence:
                if unit in evidence:
                    found.append({"conversation": conversation, "program": seed, "question": result.id, "unit": unit,
                                  "decided": reached(evidence[unit].text, result.context, items[result.id].answer),
                                  "asked": items[result.id].question, "answer": items[result.id].answer,
                                  "evidence": evidence[unit].text, "context": result.context,
                                  "material": material(evidence[unit].text, result.context)})
    return found


def material(evidence: str, context: str) -> str:
    """What a verdict is given on, as a digest: the label file keeps no dataset text."""
    return hashlib.sha256(f"{evidence}\0{context}".encode()).hexdigest()[:16]


def key(d: dict) -> tuple:
    return d["conversation"], d["program"], d["question"], d["unit"], d["material"]


def agreement(labels: list[dict], done) -> tuple[list[tuple[bool, bool]], int]:
    """(hand verdict, decision) for every label whose material is unchanged, and how many labels are stale."""
    decided = {key(d): d["decided"] for d in decisions(done)}
    pairs = [(label["reached"], decided[key(label)]) for label in labels if key(label) in decided]
    return pairs, len(labels) - len(pairs)


def closest_lines(evidence: str, context: str, count: int = 3) -> list[str]:
    """The context's lines sharing most words with the evidence, in context order: where a reader checks whether
    the evidence is there (a line that shares nothing with it cannot hold it)."""
    wanted = set(tx.content_stems(evidence))
    lines = [line for line in context.splitlines() if line.strip()]
    ranked = sorted(range(len(lines)), key=lambda i: -len(wanted & set(tx.content_stems(lines[i]))))[:count]
    return [lines[i][:400] for i in sorted(ranked)] or ["(empty context)"]


def table(done) -> str:
    lines = []
    for seed in PAPER_SEEDS:
        per_category: dict[str, Counter] = {}
        failed = 0
        for _, name, _, report in done:
            if name != seed:
                continue
            for category, counts in (report.stages or {}).items():
                per_category.setdefault(category, Counter()).update(counts)
            failed += sum(r.score < 1.0 for r in report.results)
        total = sum(per_category.values(), Counter())
        lines.append(f"{seed} ({failed} failed items; {sum(total.values())} with evidence attributed)")
        lines.append(f"  {'category':<14}" + "".join(f"{s:>13}" for s in STAGES))
        for category, counts in sorted(per_category.items()) + [("all", total)]:
            lines.append(f"  {category:<14}" + "".join(f"{counts.get(s, 0):>13}" for s in STAGES))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=LOCOMO)
    parser.add_argument("--conversations", default="0-7")
    parser.add_argument("--limit", type=int, default=40, help="questions per conversation (round-robin over categories)")
    parser.add_argument("--sample", type=int, default=0, help="print this many decisions to check by hand")
    parser.add_argument("--labels", type=Path, help="the hand-checked verdicts: report how often the decision agrees")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    done = evaluations(args)
    if args.labels:
        scored, stale = agreement(json.loads(args.labels.read_text()), done)
        right = sum(truth == guess for truth, guess in scored)
        wrong = [(t, g) for t, g in scored if t != g]
        print(f"{right} of {len(scored)} hand-checked decisions right ({right / max(len(scored), 1):.0%}); "
              f"missed evidence called reached: {sum(g and not t for t, g in wrong)}, reached evidence called missed: "
              f"{sum(t and not g for t, g in wrong)}; {stale} labels stale (their material changed: check again)")
        return 0
    if args.sample:
        rng = random.Random(args.seed)
        pool = decisions(done)
        half = args.sample // 2
        chosen = (rng.sample([d for d in pool if d["decided"]], half)
                  + rng.sample([d for d in pool if not d["decided"]], args.sample - half))
        rng.shuffle(chosen)
        for d in chosen:
            print(json.dumps({k: d[k] for k in ("conversation", "program", "question", "unit", "material", "decided")}))
            print(f"  QUESTION: {d['asked']}  ANSWER: {d['answer']}")
            print(f"  EVIDENCE: {d['evidence']}")
            for line in closest_lines(d["evidence"], d["context"]):
                print(f"  CONTEXT>  {line}")
            print()
        return 0
    print(table(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
