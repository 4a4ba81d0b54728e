"""``mstar-ray transfer``: the matrix itself (Ray-free), and two finished runs on different tasks crossed on a
real local Ray, each native cell equal to its run's own test score, the matrix in every run's report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mstar_ray.cli import main
from mstar_ray.inspect.report import build_report
from mstar_ray.runlog.transfer_matrix import TransferMatrix, TransferProgram, TransferTask

FIXTURE = Path(__file__).parent / "fixtures" / "jsonl_task"


def _task(name: str) -> TransferTask:
    return TransferTask(name=name, family="qa", metric="token F1", source="x", items=10)


def test_the_matrix_counts_the_transfers_that_fall_below_the_best_seed():
    matrix = TransferMatrix(
        tasks=[_task("a"), _task("b")],
        programs=[TransferProgram(label="best of A", id="1", native=0), TransferProgram(label="best of B", id="2", native=1),
                  TransferProgram(label="seed s", id="3", seed=True), TransferProgram(label="seed t", id="4", seed=True)],
        scores=[[0.9, 0.2], [0.5, 0.8], [0.3, 0.4], [0.6, 0.1]],
    )
    assert matrix.best_seed(0) == 0.6 and matrix.best_seed(1) == 0.4
    assert matrix.transfers() == [(0, 1, 0.2, 0.4), (1, 0, 0.5, 0.6)]
    text = matrix.text()
    assert "0.900*" in text and "0.800*" in text and "0.200 " in text
    assert "below that task's best seed in 2 of 2 pairs" in text
    # a run that returned a seed unchanged moved nothing: its row is a seed, not a transfer
    matrix.programs[0] = TransferProgram(label="best of A = seed u", id="1", native=0, seed=True)
    assert matrix.transfers() == [(1, 0, 0.5, 0.9)]


def _run(tmp_path: Path, name: str, task: dict, split: dict) -> Path:
    config = {"task": task, "split": {"train_ratio": 2.0, "confirmation_size": 0, **split},
              "search": {"max_candidates": 1, "reflections_in_flight": 1, "evaluations_in_flight": 2,
                         "seeds": ["vector_search", "experience_learner"]},
              "llm": {"embedding": {"kind": "hashing"}}, "ray": {"num_cpus": 2}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["run", str(path), "--run-dir", str(tmp_path / name)]) == 0
    return tmp_path / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("transfer")
    synthetic = _run(tmp, "synthetic", {"name": "synthetic", "seed": 1}, {"static_size": 8, "rotating_size": 2})
    own = _run(tmp, "own", {"name": "jsonl", "data": str(FIXTURE)}, {"static_size": 3, "rotating_size": 1})
    return tmp, synthetic, own


@pytest.mark.slow
def test_two_runs_crossed_on_each_others_tasks(runs, capsys):
    tmp, synthetic, own = runs
    capsys.readouterr()
    assert main(["transfer", str(synthetic), str(own), "--out", str(tmp / "matrix"),
                 "--tasks", str(tmp / "own.yaml")]) == 0
    printed = capsys.readouterr().out
    matrix = TransferMatrix.model_validate_json((tmp / "matrix" / "transfer.json").read_text())
    assert [t.name for t in matrix.tasks] == ["synthetic/seed-1", "jsonl/jsonl_task", "jsonl/jsonl_task"]
    assert matrix.tasks[0].items == len(json.loads((synthetic / "split.json").read_text())["test"])
    assert all(len(row) == 3 and all(s is not None for s in row) for row in matrix.scores) and not matrix.errors
    summaries = [json.loads((run / "summary.json").read_text()) for run in (synthetic, own)]
    for column, summary in enumerate(summaries):
        row = next(i for i, p in enumerate(matrix.programs) if p.id == summary["best"]["id"])
        # native to the first run that returned it (two runs may return the same program, a seed say)
        first = min(c for c, other in enumerate(summaries) if other["best"]["id"] == summary["best"]["id"])
        assert matrix.programs[row].native == first
        # the native cell is the run's own test of its program: same items, same texts, same score
        assert matrix.scores[row][column] == pytest.approx(summary["best"]["test_score"])
        # a task added by its config is split as its run was: the same test items, the same scores
        assert [r[2] for r in matrix.scores] == [r[1] for r in matrix.scores]
    assert "synthetic/seed-1" in printed and "*" in printed
    for run in (synthetic, own):
        assert (run / "transfer.json").read_text() == (tmp / "matrix" / "transfer.json").read_text()
        assert "Transfer to other tasks" in build_report(run)


@pytest.mark.slow
def test_an_unfinished_run_is_refused_naming_what_is_missing(runs, tmp_path, capsys):
    _, synthetic, _ = runs
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    for name in ("config.yaml", "split.json", "seeds.json"):
        (unfinished / name).write_text((synthetic / name).read_text())
    assert main(["transfer", str(unfinished)]) == 2
    assert "the run has not finished (no summary.json)" in capsys.readouterr().err
