"""One candidate cannot stop a search: an evaluation that raises is recorded as that candidate's failure
and the run goes on; on a resume, a candidate that already crashed evaluators is marked failed and skipped
instead of being sent to them again. (Every search here also shows that Ray's workers find bwrap: each
evaluator sets up a sandbox at start, and by default a run refuses to start without the jail.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mstar_ray.cli import main
from mstar_ray.driver.run_dir import RunDir
from mstar_ray.program_id import program_id
from mstar_ray.state.candidate import Candidate
from mstar_ray.state.transitions import Queued, Retried
from scripts.fault_resume import table
from tests.conftest import SEEDS

# Passes nothing the evaluator needs: no KnowledgeBase, so the static checks inside the evaluation raise.
# (A run refuses such a seed before it starts, so it reaches an evaluator as a queued child of the run.)
BROKEN = '"""A child with no KnowledgeBase."""\nINSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = ""\n'


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("failures")
    config = {
        "task": {"name": "synthetic", "seed": 1},
        "split": {"static_size": 6, "rotating_size": 2, "train_ratio": 2.0},
        "search": {"seeds": [str(SEEDS / "experience_learner.py")], "max_candidates": 2,
                   "reflections_in_flight": 1, "evaluations_in_flight": 2},
        "llm": {"embedding": {"kind": "hashing"}},
        "ray": {"num_cpus": 2},
    }
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir = folder / "run"
    assert main(["run", str(path), "--run-dir", str(run_dir)]) == 0
    return run_dir


def queue(run_dir: Path, source: str, message: str) -> tuple[Candidate, RunDir]:
    """A child the driver had queued when it stopped: a resume sends it to an evaluator."""
    seed = next(row["id"] for row in table(run_dir, "candidates") if row["origin"] == "seed")
    candidate = Candidate(id=program_id(source), source=source, parent=seed, origin="reflection",
                          commit_message=message, iteration=1)
    directory = RunDir(run_dir)
    directory.write_program(source)
    directory.record(Queued(candidate=candidate))
    return candidate, directory


def test_an_evaluation_that_raises_is_that_candidates_failure(finished_run: Path, capsys: pytest.CaptureFixture):
    evaluated = json.loads((finished_run / "summary.json").read_text())["candidates_evaluated"]
    candidate, directory = queue(finished_run, BROKEN, "breaks the contract")
    directory.close()
    code = main(["run", "--resume", str(finished_run)])
    output = capsys.readouterr()
    assert code == 0, output.out[-3000:] + output.err[-3000:]  # the search went on and ended
    failed = [row for row in table(finished_run, "candidates") if row["id"] == candidate.id][-1]
    assert failed["status"] == "failed" and "ContractError" in failed["violation_message"]
    assert any(e["kind"] == "failed" and e["candidate"] == failed["id"] for e in table(finished_run, "events"))
    summary = json.loads((finished_run / "summary.json").read_text())
    assert summary["candidates_evaluated"] == evaluated + 1  # counted like an evaluation


def test_a_resume_skips_a_candidate_that_crashed_evaluators(finished_run: Path, capsys: pytest.CaptureFixture):
    source = (SEEDS / "vector_search.py").read_text().replace("TOP_K = 5", "TOP_K = 4")
    candidate, directory = queue(finished_run, source, "crashes its evaluators")
    for _ in range(2):  # what the driver logs each time an evaluator died on it, Ray's own retries spent
        directory.record(Retried(candidate=candidate.id, work="evaluation", error="ActorDiedError"))
    directory.close()
    code = main(["run", "--resume", str(finished_run), "--json"])
    output = capsys.readouterr()
    assert code == 0, output.out[-3000:] + output.err[-3000:]
    assert json.loads(output.out) == json.loads((finished_run / "summary.json").read_text())  # --json: stdout is it
    rows = [row for row in table(finished_run, "candidates") if row["id"] == candidate.id]
    assert [row["status"] for row in rows] == ["failed"] and "crashed evaluators 2 times" in rows[0]["violation_message"]
    started = [e for e in table(finished_run, "events") if e["kind"] == "started" and e["candidate"] == candidate.id]
    assert started == []  # never sent to an evaluator again

