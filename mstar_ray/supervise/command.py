"""``mstar-ray supervise``: a history's texts (a task's, its questions ignored, or a directory's texts.jsonl)
-> a jsonl question task with verified evidence in OUT (texts.jsonl, questions.jsonl) and what it took
(supervise.json): bundles, plans, checks passed, rejections by reason, the split, the model's calls and cost;
and every bundle's attempt with the author's replies (attempts.jsonl)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mstar_ray.actors.wiring import RoleClients, probe_endpoints
from mstar_ray.exit_codes import EXIT_OK, InputError
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.llm.cache import CacheStore
from mstar_ray.supervise.llm_author import LLMAuthor
from mstar_ray.supervise.offline_author import OfflineAuthor
from mstar_ray.supervise.pipeline import supervise
from mstar_ray.families.qa.jsonl import load_texts, write_jsonl
from mstar_ray.tasks.model import RawText
from mstar_ray.families.task_registry import load_task

REPORT = "supervise.json"
ATTEMPTS = "attempts.jsonl"  # every bundle: the author's replies and why it was dropped, to audit the checks


def history(task: str | None, data: str | None, **options: Any) -> tuple[list[RawText], str]:
    """(the texts, where they came from): a task's texts, or a directory's texts.jsonl when no task is named."""
    if task is not None:
        loaded = load_task(task, data=data, **options)
        return loaded.texts, f"the texts of {loaded.name} (its {len(loaded.items)} questions ignored)"
    if data is None:
        raise InputError("give --task NAME (its texts, not its questions) or --data DIR holding texts.jsonl")
    return load_texts(data), f"{data}/texts.jsonl"


def run_supervise(texts: list[RawText], source: str, settings: LLMSettings, out: str, *, bundles: int, seed: int,
                  train_share: float, cache: CacheStore | None = None) -> int:
    if settings.task is not None:
        settings = probe_endpoints(settings)
    roles = RoleClients(settings, cache=cache)
    client = roles.client("task")
    author = LLMAuthor(client) if client is not None else OfflineAuthor()
    items, marks, report, attempts = supervise(texts, author, count=bundles, seed=seed, train_share=train_share)
    folder = Path(out)
    write_jsonl(folder, texts, items, marks)
    (folder / ATTEMPTS).write_text("".join(a.model_dump_json() + "\n" for a in attempts), encoding="utf-8")
    snapshot = roles.gateway.snapshot().total
    usage = {step: u.model_dump() for step, u in (client.usage() if client is not None else {}).items()}
    summary = {**report.model_dump(), "source": source, "llm_steps": usage,
               "cost_usd": snapshot.cost_usd, "tokens": snapshot.tokens}
    (folder / REPORT).write_text(json.dumps(summary, indent=1), encoding="utf-8")
    rejected = ", ".join(f"{n} {reason}" for reason, n in report.rejected.items()) or "none"
    print(f"{folder}: {report.kept} questions ({report.train} train, {report.validation} validation) from "
          f"{report.bundles} bundles of {report.pieces} pieces in {report.texts} texts, written by {report.author}\n"
          f"plans passing the check {report.plans_checked}, questions passing theirs {report.questions_checked}, "
          f"recovered by the blind reader {report.kept}; rejected: {rejected}\n"
          f"cost ${snapshot.cost_usd:.4f}, {snapshot.tokens} tokens; search it with task: {{name: jsonl, data: {folder}}}",
          file=sys.stderr)
    return EXIT_OK
