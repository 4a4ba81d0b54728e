"""A short search on the rubric fixture end to end on a local Ray, offline: the driver, actors, split, logs,
reflector and status see items, scores, categories and traces only, and the offline stand-in grader is named in
every output of the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mstar_ray.cli import main
from mstar_ray.families.rubric.graders import STAND_IN_LABEL
from scripts.fault_resume import table  # (logs read with plain pyarrow, as any outside tool would)
from tests.conftest import SEEDS

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "rubric-offline.yaml"


@pytest.mark.slow
def test_a_search_on_the_rubric_fixture_names_its_stand_in_grader_everywhere(tmp_path, capsys):
    config = yaml.safe_load(EXPERIMENT.read_text())
    config["task"]["data"] = str(ROOT / config["task"]["data"])
    config["search"].update(seeds=[str(SEEDS / "vector_search.py"), str(SEEDS / "experience_learner.py")],
                            max_candidates=2)
    config["llm"] = {"embedding": {"kind": "hashing"}}
    config["ray"] = {"num_cpus": 2}
    path = tmp_path / "rubric.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir = tmp_path / "run"
    assert main(["run", str(path), "--run-dir", str(run_dir)]) == 0

    summary = json.loads((run_dir / "summary.json").read_text())
    assert STAND_IN_LABEL in summary["metric"] and summary["metric"].startswith("rubric score")
    assert 0.0 <= summary["best"]["test_score"] <= 1.0 and summary["static_evidence_in_memory"] is None
    candidates = table(run_dir, "candidates")
    evaluated = [c for c in candidates if c["status"] == "evaluated"]
    assert len(evaluated) >= 3 and all(c["metric"] == summary["metric"] for c in evaluated)
    assert all(set(dict(c["category_scores"])) == {"context_seeking", "emergency_referrals", "health_data_tasks"}
               for c in evaluated)
    results = table(run_dir, "results")
    assert {"static", "rotating", "test"} <= {r["split"] for r in results}
    assert all(r["trace"].startswith(f"graded by {STAND_IN_LABEL}") for r in results)
    split = json.loads((run_dir / "split.json").read_text())
    assert len(split["static"]) == 8 and len(split["train_texts"]) == 12  # every training text fits the budget

    capsys.readouterr()
    assert main(["status", str(run_dir)]) == 0
    status = capsys.readouterr().out
    assert f"scored by {summary['metric']}" in status and "(finished)" in status
