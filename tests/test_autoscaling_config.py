"""The autoscaling test cluster is cluster.yaml's own node types (scripts/fake_autoscaler.py derives it): the
same names, the same resource names, the head the same type, amounts scaled to a small machine, the provider
Ray's fake one, and Ray's autoscaler schema accepts it. A change to cluster.yaml's node types changes it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scripts.fake_autoscaler import FAKE_HEAD_TYPE, fake_cluster_config

ROOT = Path(__file__).resolve().parents[1]


def cluster() -> dict:
    return yaml.safe_load((ROOT / "cluster.yaml").read_text())


def derived(source: dict, **options) -> dict:
    return fake_cluster_config(source, gcs_address="127.0.0.1:6379", **options)


def test_the_node_types_and_their_resource_names_are_cluster_yamls():
    source = cluster()
    config = derived(source, cpus_per_node=2, max_workers=2)
    types = config["available_node_types"]
    renamed = {FAKE_HEAD_TYPE if n == source["head_node_type"] else n for n in source["available_node_types"]}
    assert set(types) == renamed and config["head_node_type"] == FAKE_HEAD_TYPE
    for name, spec in source["available_node_types"].items():
        ours = types[FAKE_HEAD_TYPE if name == source["head_node_type"] else name]
        assert set(ours["resources"]) == set(spec["resources"])  # the same resource names
        assert ours["node_config"] == {}  # no cloud machine behind it
        for resource, amount in spec["resources"].items():
            assert (ours["resources"][resource] == 0) == (amount == 0)  # what is offered stays offered
            assert ours["resources"][resource] <= amount
        if name != source["head_node_type"]:
            assert ours["min_workers"] == spec.get("min_workers", 0)
            assert 1 <= ours["max_workers"] <= min(2, spec["max_workers"])
            assert ours["resources"].get("CPU", 0) <= 2
    assert config["provider"]["type"] == "fake_multinode"
    assert config["idle_timeout_minutes"] < source["idle_timeout_minutes"]
    assert config["upscaling_speed"] == source["upscaling_speed"]


def test_slots_scale_with_the_cpus_and_a_gpu_stays_a_gpu():
    types = derived(cluster(), cpus_per_node=2)["available_node_types"]
    assert types["cpu_spot"]["resources"] == {"CPU": 2, "evaluator": 2}  # 4 and 4 on the cloud: one slot per CPU
    assert types["gpu_model"]["resources"] == {"CPU": 2, "GPU": 1, "model_server": 1}


def test_rays_autoscaler_schema_accepts_it_and_refuses_a_broken_one():
    from jsonschema import ValidationError
    from ray.autoscaler._private.util import validate_config

    config = derived(cluster())
    validate_config(config)  # the fake provider's defaults file is not in the wheel: the schema alone
    config["available_node_types"]["cpu_spot"]["resources"]["evaluator"] = "two"
    with pytest.raises(ValidationError):
        validate_config(config)


def test_a_change_to_cluster_yaml_changes_the_tested_cluster():
    source = cluster()
    source["available_node_types"]["cpu_spot"]["resources"] = {"CPU": 8, "sandbox_slot": 4}
    source["available_node_types"]["arm_spot"] = {"min_workers": 1, "max_workers": 5, "resources": {"CPU": 2},
                                                  "node_config": {"InstanceType": "c7g.large"}}
    types = derived(source, cpus_per_node=2)["available_node_types"]
    assert types["cpu_spot"]["resources"] == {"CPU": 2, "sandbox_slot": 1}
    assert types["arm_spot"] == {"resources": {"CPU": 2}, "node_config": {}, "min_workers": 1, "max_workers": 2}


def test_the_start_up_check_names_what_no_node_type_offers():
    from mstar_ray.driver.node_types import capacity, shapes_of_autoscaling_config, unmet

    shapes = shapes_of_autoscaling_config(cluster())
    assert unmet({"CPU": 1, "evaluator": 1}, shapes) is None
    assert unmet({"CPU": 1, "GPU": 1, "model_server": 1}, shapes) is None  # the gpu_model type
    assert unmet({"CPU": 0, "head": 1}, shapes) is None
    why = unmet({"CPU": 1, "gpu_eval": 1}, shapes)
    assert why.startswith("no node type provides gpu_eval") and "cpu_spot {CPU: 4, evaluator: 4}" in why
    # each resource is offered, but by no one type: an actor lands whole on one node
    assert unmet({"evaluator": 1, "GPU": 1}, shapes).startswith("no single node type offers {GPU: 1, evaluator: 1}")
    assert unmet({"CPU": 16, "evaluator": 1}, shapes) is not None
    assert capacity(shapes)["evaluator"] == 4 * 32 and capacity(shapes)["GPU"] == 2


def test_a_type_that_may_not_start_offers_nothing():
    from mstar_ray.driver.node_types import shapes_of_autoscaling_config, unmet

    source = cluster()
    source["available_node_types"]["gpu_model"]["max_workers"] = 0
    assert unmet({"GPU": 1}, shapes_of_autoscaling_config(source)).startswith("no node type provides GPU")


def test_the_live_line_and_status_show_the_nodes_and_what_waits_for_one(tmp_path):
    import json

    from mstar_ray.driver.node_watch import node_summary
    from mstar_ray.driver.progress import ProgressState, _line
    from mstar_ray.inspect.status import _live_lines
    from mstar_ray.state.search_state import SearchState

    nodes = node_summary({"a": "cpu_spot", "b": "cpu_spot", "c": "gpu_model"}, starting=1)
    assert nodes == "2 cpu_spot, 1 gpu_model (+1 starting)" and node_summary({}, 0) == "none"
    line = _line(ProgressState(evaluating=4, waiting_for_node=2, nodes=nodes), SearchState(), 10.0)
    assert "in flight: 4 eval (2 waiting for a node)," in line and "· nodes 2 cpu_spot, 1 gpu_model (+1 starting)" in line
    assert "waiting" not in _line(ProgressState(evaluating=4), SearchState(), 10.0)
    (tmp_path / "live.json").write_text(json.dumps({"phase": "searching", "evaluations": [], "nodes": nodes,
                                                    "waiting_for_node": 2}))
    assert _live_lines(tmp_path) == [f"nodes: {nodes}; 2 evaluations waiting for a node"]
