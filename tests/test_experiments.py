"""Every shipped experiment config loads, with its seeds found from any working directory: a typo there would
meet a user first."""

from __future__ import annotations

from pathlib import Path

import pytest

from mstar_ray.reflect.edit_formats import resolve_format
from mstar_ray.run_config import load_run_config, resolve_seeds

EXPERIMENTS = sorted((Path(__file__).resolve().parents[1] / "experiments").glob("*.yaml"))


@pytest.mark.parametrize("path", EXPERIMENTS, ids=[p.stem for p in EXPERIMENTS])
def test_experiment_config_loads(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_run_config(path)
    assert all(seed.exists() for seed in resolve_seeds(config, path))


def test_the_local_llm_experiment_needs_no_key_and_writes_functions() -> None:
    config = load_run_config(next(p for p in EXPERIMENTS if p.stem == "local-llm"))
    assert all(endpoint.api_key_env is None for endpoint in config.llm.endpoints().values())
    reflector = config.llm.reflector
    assert resolve_format(reflector.edit_format, reflector.model) == "function" and reflector.context_tokens


def test_the_served_experiments_name_models_their_serve_sections_deploy() -> None:
    gpu = load_run_config(next(p for p in EXPERIMENTS if p.stem == "cluster-gpu"))
    [model] = gpu.serve.models
    assert model.runtime == "vllm" and model.resources.gpus >= 1 and gpu.llm.task.served == model.name
    local = load_run_config(next(p for p in EXPERIMENTS if p.stem == "local-served"))
    assert [m.runtime for m in local.serve.models] == ["llama_cpp"] and local.llm.task.served == "smollm2"
    assert local.serve.models[0].n_threads == 1 and not local.serve.keep
