"""Write any question-answering task as a jsonl task directory (texts.jsonl, questions.jsonl), e.g. a LoCoMo
conversation, so that the jsonl loader can be checked against the original loader on real data and a user
can see the format filled in. The output holds the data it was made from: never commit it (LoCoMo is CC BY-NC).

    .venv/bin/python scripts/task_to_jsonl.py OUT_DIR --task locomo --conversation 0 [--data locomo10.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mstar_ray.tasks.jsonl import QUESTIONS_FILE, TEXTS_FILE
from mstar_ray.tasks.model import Task
from mstar_ray.tasks.registry import TASK_NAMES, load_task


def write_jsonl_task(task: Task, out: Path) -> None:
    if task.family != "qa":
        raise ValueError(f"task {task.name} is of the {task.family} family; a jsonl task holds questions and answers")
    out.mkdir(parents=True, exist_ok=True)
    texts = [{"id": t.id, "text": t.text, **({"units": [u.model_dump() for u in t.units]} if t.units else {})}
             for t in task.texts]
    held_out = set(task.test_ids)
    questions = [{"id": q.id, "question": q.question, "answer": q.answer, "category": q.category,
                  **({"evidence": q.evidence} if q.evidence else {}), **({"split": "test"} if q.id in held_out else {})}
                 for q in task.items]
    for name, records in ((TEXTS_FILE, texts), (QUESTIONS_FILE, questions)):
        (out / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--task", choices=TASK_NAMES, default="locomo")
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--data", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    task = load_task(args.task, conversation=args.conversation, data=args.data, seed=args.seed)
    write_jsonl_task(task, args.out)
    print(f"{args.out}: {len(task.texts)} texts, {len(task.items)} questions from {task.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
