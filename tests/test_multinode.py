"""The search on a simulated three-node cluster (``ray.cluster_utils.Cluster``): evaluations run on the
worker nodes, spread over both; a worker node removed mid-run loses no candidate; the run's state and
logs stay with the driver, whose node runs no evaluation."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import yaml

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from mstar_ray.cli import main  # noqa: E402
from scripts.fault_resume import check, config, table


@pytest.fixture
def cluster():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    workers = [cluster.add_node(num_cpus=2, resources={"evaluator": 4}) for _ in range(2)]
    cluster.wait_for_nodes()
    yield cluster, workers
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()


def run_config(tmp_path: Path, candidates: int) -> str:
    settings = config(candidates)
    settings["search"].update(evaluations_in_flight=4, reflections_in_flight=2)
    settings["ray"] = {"evaluator_cpus": 0.5, "evaluator_resources": {"evaluator": 1}, "max_restarts": 3}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(settings))
    return str(path)


def test_evaluations_spread_over_the_worker_nodes_and_survive_losing_one(cluster, tmp_path):
    cluster, workers = cluster
    run_dir = tmp_path / "run"
    head_id = cluster.head_node.node_id

    def remove_a_worker_mid_run() -> None:
        deadline = time.monotonic() + 240
        while len(table(run_dir, "candidates")) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        cluster.remove_node(workers[0])

    remover = threading.Thread(target=remove_a_worker_mid_run, daemon=True)
    remover.start()
    assert main(["run", run_config(tmp_path, 16), "--run-dir", str(run_dir), "--address", cluster.address]) == 0
    remover.join(timeout=5)
    rows = table(run_dir, "candidates")
    nodes = {r["node_id"] for r in rows}
    assert head_id not in nodes  # the driver's node runs no evaluation
    assert workers[0].node_id in nodes and workers[1].node_id in nodes
    # A duplicate child is logged without an evaluation, so without a node.
    evaluated = [r for r in rows if r["status"] != "duplicate"]
    after = [r["node_id"] for r in evaluated[-4:]]
    assert set(after) == {workers[1].node_id}  # the last evaluations ran on the node that was left
    assert check(run_dir) == []
    assert sum(r["origin"] != "seed" for r in evaluated) == 16
    # every file of the run was written by the driver, into its own directory
    assert {p.name for p in run_dir.iterdir()} >= {"candidates.arrows", "events.arrows", "cache.sqlite", "summary.json"}
