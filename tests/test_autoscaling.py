"""The search on Ray's own autoscaler, with cluster.yaml's node types (scripts/fake_autoscaler.py: Ray's fake node
provider launching local raylets): a run that asks for a resource no node type offers stops at once, naming
it; a search started with no worker nodes makes the autoscaler start ``cpu_spot`` nodes for its evaluators, runs
its evaluations there and lets them go after; a spot node lost mid-search loses nothing, counts nothing twice,
and is replaced. (A served model on the gpu_model type: tests/test_autoscaling_models.py.)"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

ray = pytest.importorskip("ray")

from ray.autoscaler._private.fake_multi_node.node_provider import FAKE_HEAD_NODE_ID as HEAD_ID  # noqa: E402

from scripts.fake_autoscaler import FakeAutoscalingCluster, kill_node  # noqa: E402
from scripts.fault_resume import check, config, table  # noqa: E402


@pytest.fixture
def cluster():
    with FakeAutoscalingCluster(cpus_per_node=2, max_workers=2, idle_timeout_minutes=0.1) as fake:
        yield fake


def mstar_ray(cluster: FakeAutoscalingCluster, *args: str) -> subprocess.CompletedProcess:
    """The command as a user runs it against the cluster, in a process of its own: Ray reads its authentication
    mode once per process, and the fake cluster's (``cluster.env``) must not become this test process's, whose
    later local Rays would then refuse it."""
    return subprocess.run([str(Path(sys.executable).with_name("mstar-ray")), *args], capture_output=True, text=True,
                          env={**os.environ, **cluster.env}, timeout=1200)


def workers_now(cluster: FakeAutoscalingCluster) -> int:
    """How many worker nodes are alive, asked from a process of its own (see ``mstar_ray``)."""
    probe = ("import ray; from scripts.fake_autoscaler import worker_nodes; "
             f"ray.init(address={cluster.address!r}, log_to_driver=False); print(len(worker_nodes()))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **cluster.env}, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


def run_config(tmp_path: Path, candidates: int, **ray_section) -> str:
    settings = config(candidates)
    settings["search"].update(evaluations_in_flight=4, reflections_in_flight=2)
    settings["ray"] = {"evaluator_cpus": 1, "evaluator_resources": {"evaluator": 1}, "max_restarts": 3, **ray_section}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(settings))
    return str(path)


def launched(cluster: FakeAutoscalingCluster, node_type: str) -> int:
    """Nodes of ``node_type`` the autoscaler says it added."""
    return sum(int(n) for n in re.findall(rf"Adding (\d+) node\(s\) of type {node_type}", cluster.monitor_log()))


def test_a_resource_no_node_type_offers_stops_the_run_at_once_naming_it(cluster, tmp_path):
    path = Path(run_config(tmp_path, 4, evaluator_resources={"gpu_eval": 1}))
    settings = yaml.safe_load(path.read_text())
    # and a served model whose replica wants two GPUs on one node: gpu_model nodes have one each
    settings["llm"]["task"] = {"served": "qwen"}
    settings["serve"] = {"models": [{"name": "qwen", "runtime": "vllm", "model": "Qwen/Qwen2.5-7B-Instruct",
                                     "resources": {"gpus": 2}}]}
    path.write_text(yaml.safe_dump(settings))
    done = mstar_ray(cluster, "run", str(path), "--run-dir", str(tmp_path / "run"), "--address", cluster.address)
    err = done.stderr
    assert done.returncode == 2, err
    assert "ray.evaluator_cpus and ray.evaluator_resources" in err and "no node type provides gpu_eval" in err
    assert "serve.models[0] (qwen).resources asks each actor for {CPU: 1, GPU: 2}: no single node type offers" in err
    assert "cpu_spot {CPU: 2, evaluator: 2}" in err  # the node types it looked at, as the autoscaler has them
    assert not (tmp_path / "run" / "candidates.arrows").exists()  # nothing was started
    assert launched(cluster, "cpu_spot") == launched(cluster, "gpu_model") == 0


def test_a_search_from_no_workers_scales_cpu_spot_up_and_releases_it(cluster, tmp_path):
    run_dir = tmp_path / "run"
    done = mstar_ray(cluster, "run", run_config(tmp_path, 8), "--run-dir", str(run_dir), "--address", cluster.address)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(re.findall(r"node joined: cpu_spot", done.stdout + done.stderr)) == 2  # the run says what joined
    rows = [r for r in table(run_dir, "candidates") if r["status"] != "duplicate"]
    nodes = {r["node_id"] for r in rows}
    # 4 evaluators of {CPU: 1, evaluator: 1}; a cpu_spot node offers 2 of each: two nodes, none of the GPU type.
    # On a loaded machine the autoscaler may launch a node again when one is slow to register (seen once beside
    # a measurement run: 3 launched, 2 joined): what the search used is the check.
    assert launched(cluster, "cpu_spot") >= 2 and launched(cluster, "gpu_model") == 0
    assert HEAD_ID not in nodes and len(nodes) == 2
    assert check(run_dir) == [] and sum(r["origin"] != "seed" for r in rows) == 8
    deadline = time.monotonic() + 120
    while workers_now(cluster) and time.monotonic() < deadline:  # idle_timeout_minutes: 0.1
        time.sleep(1)
    assert workers_now(cluster) == 0  # released once the search no longer needs them


@pytest.mark.slow
def test_a_spot_node_lost_mid_search_is_replaced_and_loses_nothing(cluster, tmp_path):
    run_dir = tmp_path / "run"
    killed: list[str] = []

    def kill_a_node_mid_search() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            evaluated = [r for r in table(run_dir, "candidates") if r["node_id"] and r["node_id"] != HEAD_ID]
            if len(evaluated) >= 3:
                killed.append(evaluated[-1]["node_id"])
                kill_node(cluster.temp_dir, killed[0])
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_a_node_mid_search, daemon=True)
    killer.start()
    done = mstar_ray(cluster, "run", run_config(tmp_path, 20), "--run-dir", str(run_dir), "--address", cluster.address)
    assert done.returncode == 0, done.stderr[-3000:]
    killer.join(timeout=5)
    assert killed, "the search ended before a node could be killed"
    said = done.stdout + done.stderr
    assert f"node left: cpu_spot {killed[0][:8]}…{killed[0][-5:]}" in said  # the run says what it lost
    rows = [r for r in table(run_dir, "candidates") if r["status"] != "duplicate"]
    assert check(run_dir) == []  # none evaluated twice, none queued and lost
    assert sum(r["origin"] != "seed" for r in rows) == 20
    # the autoscaler let the lost node go and started a new one of its type in its place (max_workers is 2)
    decisions = [line for line in cluster.monitor_log().splitlines() if "event_summary" in line or "Terminating" in line]
    assert any(f"Terminating the node with id {killed[0]}" in line for line in decisions), decisions
    assert launched(cluster, "cpu_spot") >= 3, decisions
    assert killed[0] not in {r["node_id"] for r in rows[-3:]}  # what followed ran on the nodes left

