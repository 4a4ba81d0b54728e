"""The task-agent protocol end to end: real sandboxes, the offline backend, real tasks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.contract import ContractError
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from mstar_ray.families.task_registry import load_task
from tests.conftest import HOSTILE, SEEDS, seed_source

AMNESIAC = seed_source("experience_learner").replace(
    'text = "Lessons:\\n"', 'return ""\n        text = "Lessons:\\n"'
)


@pytest.fixture(scope="module")
def synthetic():
    return load_task("synthetic", seed=3)


def run(source, task, **kwargs):
    return evaluate(source, task, OfflineBackend(), HashingEmbedder(), **kwargs)


@pytest.mark.parametrize("seed", ["vector_search", "llm_summarizer", "experience_learner"])
def test_each_seed_runs_the_whole_protocol(seed, synthetic):
    report = run(seed_source(seed), synthetic)
    assert report.violation is None, report.violation
    assert report.texts_written == len(synthetic.texts)
    assert report.calls["extract"] == len(synthetic.texts)
    assert report.calls["query"] == report.calls["answer"] == len(synthetic.items)
    assert set(report.categories) == {"single-hop", "temporal", "knowledge-update", "multi-hop"}
    assert 0.0 < report.score <= 1.0
    assert "seccomp" in report.sandbox.layers or "seccomp" in report.sandbox.missing_layers
    if seed == "llm_summarizer":
        assert report.calls["toolkit_llm"] == len(synthetic.items)
    if seed == "vector_search":
        assert report.calls["embedded_texts"] >= len(synthetic.texts)


def test_memory_that_retrieves_nothing_scores_lower(synthetic):
    remembering = run(seed_source("experience_learner"), synthetic)
    amnesiac = run(AMNESIAC, synthetic)
    assert amnesiac.violation is None
    assert amnesiac.score < remembering.score - 0.1


def test_evaluation_is_deterministic(synthetic):
    first = run(seed_source("vector_search"), synthetic)
    second = run(seed_source("vector_search"), synthetic)
    assert [r.prediction for r in first.results] == [r.prediction for r in second.results]
    assert first.score == second.score


def test_runtime_violation_scores_zero_and_names_the_reason(synthetic):
    source = (HOSTILE / "long_read.py").read_text()
    report = run(source, synthetic)
    assert report.violation is not None
    assert report.violation.phase == "read" and report.violation.kind == "read_too_long"
    assert report.score == 0.0 and all(r.score == 0.0 for r in report.results)


def test_timeout_in_write_stops_the_evaluation(synthetic):
    report = run((HOSTILE / "loop_in_write.py").read_text(), synthetic, limits=SandboxLimits(call_timeout_s=1.0))
    assert report.violation.kind == "timeout" and report.violation.phase == "write"
    assert report.calls["extract"] == 1 and report.calls["query"] == 0


def test_contract_breaking_program_is_never_started(synthetic):
    with pytest.raises(ContractError):
        run((HOSTILE / "import_ctypes.py").read_text(), synthetic)


def test_locomo_conversation_with_limit(locomo_path):
    task = load_task("locomo", conversation=0, limit=12, data=str(locomo_path))
    report = run(seed_source("experience_learner"), task)
    assert report.violation is None
    assert len(report.results) == 12
    assert set(report.categories) == {"multi-hop", "temporal", "open-domain", "single-hop"}
    assert report.texts_written == len(task.texts) == 19  # one text per session


def cli(*args: str, env=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mstar_ray.cli", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_eval_command_prints_the_score_table_and_json():
    table = cli("eval", str(SEEDS / "vector_search.py"), "--task", "synthetic", "--limit", "8")
    assert table.returncode == 0, table.stderr
    for word in ("overall", "single-hop", "temporal", "wall time", "extract", "offline", "layers"):
        assert word in table.stdout
    as_json = cli("eval", str(SEEDS / "vector_search.py"), "--task", "synthetic", "--limit", "8", "--json")
    report = json.loads(as_json.stdout)
    assert len(report["results"]) == 8 and 0.0 <= report["score"] <= 1.0


def test_eval_command_exits_nonzero_on_a_violating_program():
    done = cli("eval", str(HOSTILE / "long_read.py"), "--limit", "2")
    assert done.returncode == 1
    assert "VIOLATION during read" in done.stdout and "read_too_long" in done.stdout


def test_eval_command_names_a_missing_data_file(tmp_path):
    done = cli("eval", str(SEEDS / "vector_search.py"), "--task", "locomo", "--data", str(tmp_path / "nope.json"))
    assert done.returncode == 2
    assert str(tmp_path / "nope.json") in done.stderr and "MSTAR_LOCOMO_PATH" in done.stderr


def test_progress_is_reported_after_every_write_and_question(synthetic):
    import dataclasses

    seen = []
    task = load_task("synthetic", seed=3, granularity="turn")
    task = task.model_copy(update={"texts": task.texts[:12], "items": task.items[:5]})
    report = run(seed_source("vector_search"), task, progress=lambda p: seen.append(dataclasses.replace(p)))
    assert report.violation is None
    assert [(p.texts_done, p.items_done) for p in seen] == (
        [(t, 0) for t in range(13)] + [(12, q) for q in range(1, 6)] + [(12, 5)])
    assert all((p.texts_total, p.items_total) == (12, 5) for p in seen)
    assert seen[0].eta_s() is None and seen[1].eta_s() > 0 and seen[-1].finished and seen[-1].eta_s() == 0.0
    assert [p.finished for p in seen].count(True) == 1


def test_a_violation_ends_the_progress_early_but_finished(synthetic):
    seen = []
    report = run((HOSTILE / "long_read.py").read_text(), synthetic,
                 progress=lambda p: seen.append((p.texts_done, p.items_done, p.finished)))
    assert report.violation is not None and report.violation.phase == "read"
    assert seen[-1] == (len(synthetic.texts), 0, True)  # the violating question is not counted as answered


def test_the_eta_counts_the_work_left_at_the_rates_seen():
    from mstar_ray.results import EvalProgress

    writing = EvalProgress(texts_total=10, items_total=4, texts_done=5, write_s=10.0)
    assert writing.eta_s() == 5 * 2.0 + 4 * 2.0  # a question costs a write until one is timed
    reading = EvalProgress(texts_total=10, items_total=4, texts_done=10, items_done=1, write_s=20.0, read_s=6.0)
    assert reading.eta_s() == 3 * 6.0
    assert EvalProgress(texts_total=0, items_total=3).eta_s() is None
def test_eval_texts_bounds_the_texts_written_and_progress_goes_to_stderr(locomo_path):
    """issue 15, item 5: ``--limit`` alone still wrote all 509 texts of a conversation, silently."""
    done = cli("eval", str(SEEDS / "vector_search.py"), "--task", "locomo", "--data", str(locomo_path),
               "--conversation", "7", "--limit", "6", "--texts", "10", "--embedder", "hashing", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # stdout stays the JSON alone
    import re

    written, total = map(int, re.search(r"writing (\d+) of (\d+) texts: those holding the evidence of the 6 "
                                        r"questions asked", done.stderr).groups())
    assert 10 <= written < total and report["texts_written"] == written and len(report["results"]) == 6
    lines = done.stderr.splitlines()
    assert any(line.startswith(f"writing texts {written}/{written}") for line in lines)
    assert any(line.startswith("evaluating items 6/6") for line in lines)
    refused = cli("eval", str(SEEDS / "vector_search.py"), "--task", "synthetic", "--texts", "0")
    assert refused.returncode == 2 and "--texts must be at least 1" in refused.stderr


def test_texts_covering_the_questions_hold_their_evidence_and_fill_up_as_the_search_does(locomo_path):
    from mstar_ray.embedding.hashing import HashingEmbedder
    from mstar_ray.search.split import covering_texts
    from mstar_ray.search.subsets import facility_location

    task = load_task("locomo", conversation=7, limit=8, data=str(locomo_path), granularity="turn")
    embedder = HashingEmbedder()
    chosen = [t.id for t in covering_texts(task, task.items, embedder, 20)]
    holders = task.evidence_holders()
    evidence = {holders[u] for q in task.items for u in q.evidence}
    assert evidence <= set(chosen) and len(chosen) == max(20, len(evidence))
    order = [t.id for t in task.texts]
    assert chosen == sorted(chosen, key=order.index)  # written in the conversation's order
    index = {t.id: i for i, t in enumerate(task.texts)}
    picks = facility_location(embedder.embed([q.question for q in task.items]),
                              embedder.embed([t.text for t in task.texts]), 20,
                              given=sorted(index[t] for t in evidence))
    assert set(chosen) == {task.texts[i].id for i in picks}
    assert covering_texts(task, task.items, embedder, 10_000) == task.texts


def test_eval_progress_lines_say_rate_and_time_left():
    import io

    from mstar_ray.results import EvalProgress
    from mstar_ray.cli import ProgressPrinter

    times = iter([0.0, 10.0, 20.0, 30.0, 34.0, 40.0])
    out = io.StringIO()
    printer = ProgressPrinter(out, every_s=10)
    printer.clock = lambda: next(times)
    steps = [(0, 0, 0.0, 0.0), (1, 0, 10.0, 0.0), (2, 0, 20.0, 0.0), (2, 1, 20.0, 10.0), (2, 2, 20.0, 14.0),
             (2, 3, 20.0, 20.0)]
    for texts, questions, write_s, read_s in steps:
        printer(EvalProgress(texts_total=2, items_total=3, texts_done=texts, items_done=questions,
                             write_s=write_s, read_s=read_s))
    assert out.getvalue().splitlines() == [
        "writing texts 0/2 (0 s, 0.00/s)",
        "writing texts 1/2 (10 s, 0.10/s, about 0.7 min left)",
        "writing texts 2/2 (20 s, 0.10/s)",
        "evaluating items 1/3 (10 s, 0.10/s, about 0.3 min left)",
        "evaluating items 3/3 (20 s, 0.15/s)",
    ]
