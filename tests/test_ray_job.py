"""The README's cluster path on a real Ray cluster started with `ray start` (a head and a worker node, each
its own raylet, loopback only): `mstar-ray run --address auto` submitted with `ray job submit --working-dir .`
(so the driver imports the job's copy of the checkout), stopped with `ray job stop` mid-search, resumed as a
second job, then `status`, `report` and `export` on the run directory: nothing lost, nothing evaluated twice,
evaluations on both nodes."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from scripts.fault_resume import _rows_now, check, table
from tests.conftest import ROOT
from tests.ray_start_cluster import RayStartCluster

MSTAR_RAY = str(Path(sys.executable).with_name("mstar-ray"))
NODE = {"num_cpus": 1, "resources": {"evaluator": 2}}  # as the README's `ray start` lines give each node
CANDIDATES = 20  # enough that the search is still running when the test stops it


@pytest.fixture
def cluster():
    pytest.importorskip("ray.dashboard")
    with RayStartCluster(NODE, [NODE], env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}) as cluster:
        yield cluster


def _config(tmp_path: Path) -> Path:
    settings = {
        "task": {"name": "synthetic", "seed": 1},
        "split": {"static_size": 8, "rotating_size": 2, "train_ratio": 2.0},
        "search": {"seeds": ["vector_search", "experience_learner"], "max_candidates": CANDIDATES,
                   "reflections_in_flight": 1, "evaluations_in_flight": 2},
        "llm": {"embedding": {"kind": "minilm"}},
        "ray": {"evaluator_resources": {"evaluator": 1}},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


# `ray job status` prints a running job's status as a field and a finished one's as a sentence
_FINISHED = {"succeeded": "SUCCEEDED", "was stopped": "STOPPED", "failed": "FAILED"}


def _job_status(cluster: RayStartCluster, job: str) -> str:
    out = cluster.job("status", job).stdout
    found = re.search(rf"Status for job '{job}': (\w+)|Job '{job}' (succeeded|was stopped|failed)", out)
    if found is None:
        return out
    return found.group(1) or _FINISHED[found.group(2)]


def test_a_search_submitted_as_a_ray_job_is_stopped_resumed_and_inspected(cluster, tmp_path):
    config, run_dir = _config(tmp_path), tmp_path / "run"
    submitted = cluster.job("submit", "--no-wait", "--submission-id", "search-1", "--working-dir", ".", "--",
                            MSTAR_RAY, "run", str(config), "--address", "auto", "--run-dir", str(run_dir), cwd=ROOT)
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    deadline = time.monotonic() + 300
    next_status = time.monotonic()
    while _rows_now(run_dir) < 3 and time.monotonic() < deadline:
        if time.monotonic() >= next_status:  # each `ray job status` is a Python start-up: seldom
            status = _job_status(cluster, "search-1")
            assert status in ("PENDING", "RUNNING"), cluster.job("logs", "search-1").stdout[-5000:]
            next_status = time.monotonic() + 5
        time.sleep(0.2)
    assert _rows_now(run_dir) >= 3, cluster.job("logs", "search-1").stdout[-5000:]
    assert cluster.job("stop", "search-1").returncode == 0  # SIGTERM to the driver, as a user stops a job
    logs = cluster.job("logs", "search-1").stdout
    assert f"resume with  mstar-ray run --resume {run_dir}" in logs, logs[-5000:]
    assert _rows_now(run_dir) < 2 + CANDIDATES  # stopped mid-search

    resumed = cluster.job("submit", "--submission-id", "search-2", "--working-dir", ".", "--",
                          MSTAR_RAY, "run", "--resume", str(run_dir), "--address", "auto", cwd=ROOT, timeout=600)
    status = _job_status(cluster, "search-2")
    assert (resumed.returncode, status) == (0, "SUCCEEDED"), f"{status}\n{resumed.stdout[-5000:]}\n{resumed.stderr[-3000:]}"

    assert check(run_dir) == []  # every queued candidate has its row, none has two
    rows = [r for r in table(run_dir, "candidates") if r["status"] != "duplicate"]
    assert sum(r["origin"] != "seed" for r in rows) == CANDIDATES
    assert len({r["node_id"] for r in rows}) == 2  # evaluations ran on both raylets
    events = [e["kind"] for e in table(run_dir, "events")]
    assert events.count("resumed") == 1

    for command in (["status", str(run_dir)], ["report", str(run_dir)], ["export", str(run_dir), "--best",
                                                                          str(tmp_path / "best.py")]):
        done = subprocess.run([MSTAR_RAY, *command], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    assert (run_dir / "report.html").stat().st_size > 0 and (tmp_path / "best.py").read_text().strip()
