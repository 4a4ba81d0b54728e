"""Write any question-answering task as a jsonl task directory (texts.jsonl, questions.jsonl), e.g. a LoCoMo
conversation, so that the jsonl loader can be checked against the original loader on real data and a user
can see the format filled in. The output holds the data it was made from: never commit it (LoCoMo is CC BY-NC).

    .venv/bin/python scripts/task_to_jsonl.py OUT_DIR --task locomo --conversation 0 [--data locomo10.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mstar_ray.families.qa.jsonl import write_jsonl
from mstar_ray.tasks.model import Task
from mstar_ray.families.task_registry import TASK_NAMES, load_task


def write_jsonl_task(task: Task, out: Path) -> None:
    if task.family != "qa":
        raise ValueError(f"task {task.name} is of the {task.family} family; a jsonl task holds questions and answers")
    write_jsonl(out, task.texts, task.items, {q: "test" for q in task.test_ids})


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
