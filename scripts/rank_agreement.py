"""Does the static score rank programs the way held-out questions would? Measured on a finished run.

Every evaluated member of the run (seeds and children) is evaluated once more on the run's test questions
with every text written, through the same ``evaluate`` protocol the run's final test uses (in this
process, with the run's LLM settings and sandbox limits), and the static scores the search saw are set
against those test scores:

- Spearman's rho between static and test scores over the whole population;
- top-1 agreement: is the program the run chose also the test best, or within noise of it (the 95%
  paired bootstrap interval of the test best's lead over it, over the test questions, includes 0);
- best seed against the chosen program and against the best evolved program by static score, static
  and test: the search must not report progress that the test questions take back;
- the share of the static questions' evidence that was in the texts written for the search;
- wall time and task-agent calls (extraction, query, answer, toolkit: the LLM calls a real backend
  makes) per evaluation, for a search evaluation (the first seed's job, re-run) and for a test one.

The logs are read with pyarrow alone, so runs written by older versions of mstar_ray read too. Runs
made before LoCoMo texts became sessions hold one text per turn: pass ``--granularity turn`` for them.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/rank_agreement.py RUN_DIR [--granularity turn]
        [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.actors.wiring import RoleClients  # noqa: E402
from mstar_ray.agent.evaluation import evaluate  # noqa: E402
from mstar_ray.run_config import RunConfig  # noqa: E402
from mstar_ray.search.noise import paired_interval  # noqa: E402
from mstar_ray.tasks.model import Task  # noqa: E402
from mstar_ray.families.task_registry import task_from_config  # noqa: E402

PROTOCOL_CALLS = ("extract", "query", "answer", "toolkit_llm")


def log_rows(run_dir: Path, table: str) -> list[dict]:
    """Every complete row of a run log, whatever its schema version (a torn tail is skipped)."""
    path = run_dir / f"{table}.arrows"
    if not path.exists():
        return []
    rows: list[dict] = []
    try:
        for batch in ipc.open_stream(pa.OSFile(str(path))):
            rows += batch.to_pylist()
    except (pa.ArrowInvalid, OSError):
        pass  # a torn last batch: the rows before it are whole
    return rows


def spearman(x: list[float], y: list[float]) -> float:
    """Pearson's correlation of the ranks, ties sharing their mean rank."""

    def ranks(values: list[float]) -> np.ndarray:
        array = np.asarray(values, dtype=float)
        order = array.argsort(kind="stable")
        result = np.empty(len(array))
        result[order] = np.arange(1, len(array) + 1)
        for value in np.unique(array):
            tied = array == value
            result[tied] = result[tied].mean()
        return result

    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def load_run_task(run_dir: Path, config: RunConfig, granularity: str | None) -> Task:
    task = task_from_config(config.task.model_copy(update={"granularity": granularity or config.task.granularity}))
    split = json.loads((run_dir / "split.json").read_text())
    missing = set(split["train_texts"]) - {text.id for text in task.texts}
    if missing:
        raise SystemExit(f"{run_dir}: texts {sorted(missing)[:3]} of split.json are not in the task as loaded; "
                         "a run made with one text per turn needs --granularity turn")
    return task


def evidence_share(task: Task, written: set[str], question_ids: list[str]) -> tuple[float | None, int, int]:
    """(share, units in memory, units) over the evidence of the given questions."""
    holder = task.evidence_holders()
    by_id = {q.id: q for q in task.items}
    units = [unit for qid in question_ids for unit in by_id[qid].evidence]
    held = sum(1 for unit in units if holder.get(unit) in written)
    return (held / len(units) if units else None), held, len(units)


def protocol_calls(report) -> int:
    return sum(report.calls.get(step, 0) for step in PROTOCOL_CALLS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--granularity", choices=("session", "turn"), default=None,
                        help="the run's text granularity (default: its config's; turn for runs made before it existed)")
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON here")
    args = parser.parse_args()
    run_dir: Path = args.run_dir
    config = RunConfig.model_validate(yaml.safe_load((run_dir / "config.yaml").read_text()))
    summary = json.loads((run_dir / "summary.json").read_text())
    split = json.loads((run_dir / "split.json").read_text())
    task = load_run_task(run_dir, config, args.granularity)
    questions = {q.id: q for q in task.items}

    rows = [r for r in log_rows(run_dir, "candidates") if r["status"] == "evaluated"]
    members = list({r["id"]: r for r in rows}.values())
    sources = {m["id"]: (run_dir / "programs" / f"{m['id']}.py").read_text() for m in members}
    roles = RoleClients(config.llm)
    backend, embedder = roles.backend(), roles.embedder()
    test_task = Task(name=task.name, texts=list(task.texts), items=[questions[q] for q in split["test"]])

    test_scores: dict[str, list[float]] = {}
    test_walls, test_calls = [], []
    for index, member in enumerate(members, 1):
        started = time.monotonic()
        report = evaluate(sources[member["id"]], test_task, backend, embedder, limits=config.sandbox)
        test_walls.append(time.monotonic() - started)
        test_calls.append(protocol_calls(report))
        test_scores[member["id"]] = [r.score for r in report.results]
        print(f"  [{index}/{len(members)}] {member['id']} static {member['static_score']:.3f} "
              f"test {report.score:.3f} ({test_walls[-1]:.1f} s)", file=sys.stderr, flush=True)

    static = {m["id"]: m["static_score"] for m in members}
    test = {mid: float(np.mean(s)) for mid, s in test_scores.items()}
    ids = list(static)
    chosen, best_seed = summary["best"]["id"], summary["best_seed"]["id"]
    consistency = {which: (summary[which]["test_score"], test[summary[which]["id"]]) for which in ("best", "best_seed")}
    test_best = max(ids, key=lambda i: test[i])
    low, high = paired_interval(test_scores[test_best], test_scores[chosen], seed=config.search.seed)
    evolved = [m for m in members if m["origin"] != "seed"]
    best_evolved = max(evolved, key=lambda m: m["static_score"])["id"] if evolved else None

    # The search evaluation of the first seed, re-run: what one candidate costs during the search.
    first = members[0]
    written = first.get("texts_written") or split["train_texts"]  # runs before schema 3 wrote train_texts only
    asked = list(dict.fromkeys(r["question_id"] for r in log_rows(run_dir, "results")
                               if r["candidate"] == first["id"] and r["split"] != "test"))
    texts = {t.id: t for t in task.texts}
    search_task = Task(name=task.name, texts=[texts[i] for i in written], items=[questions[q] for q in asked])
    started = time.monotonic()
    search_report = evaluate(sources[first["id"]], search_task, backend, embedder, limits=config.sandbox)
    search_wall = time.monotonic() - started
    share, held, units = evidence_share(task, set(written), split["static"])

    def pair(member_id: str | None) -> dict | None:
        return None if member_id is None else {"id": member_id, "static": static[member_id], "test": test[member_id]}

    figures = {
        "run": str(run_dir), "task": task.name, "texts": len(task.texts), "members": len(ids),
        "spearman_rho": spearman([static[i] for i in ids], [test[i] for i in ids]),
        "chosen": pair(chosen), "best_seed": pair(best_seed), "best_evolved_by_static": pair(best_evolved),
        "test_best": pair(test_best),
        "chosen_test_rank": 1 + sum(1 for i in ids if test[i] > test[chosen]),
        "top1_is_test_best": test[chosen] >= test[test_best],
        "top1_within_noise": low <= 0.0,
        "test_best_lead_interval": [low, high],
        "chosen_minus_best_seed": {"static": static[chosen] - static[best_seed], "test": test[chosen] - test[best_seed]},
        "static_evidence_in_memory": {"share": share, "units_in_memory": held, "units": units},
        "texts_written_in_search": len(written),
        "search_eval": {"wall_s": search_wall, "calls": protocol_calls(search_report), "texts": len(written),
                        "chars_written": sum(len(texts[i].text) for i in written), "items": len(asked)},
        "test_eval": {"wall_s_mean": float(np.mean(test_walls)), "calls_mean": float(np.mean(test_calls)),
                      "texts": len(task.texts), "chars_written": sum(len(t.text) for t in task.texts),
                      "items": len(split["test"])},
        "search_eval_wall_s_logged_mean": float(np.mean([m["wall_seconds"] for m in members])),
        "summary_test_scores_reproduced": {k: abs(a - b) < 1e-9 for k, (a, b) in consistency.items() if a is not None},
        "how_chosen": (summary.get("selection") or {}).get("how", "the highest static score (runs before the selection rule)"),
    }
    text = json.dumps(figures, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
