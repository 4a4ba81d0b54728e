"""What a user of ``mstar-ray eval`` sees with real endpoints configured: a config error that names the
key, a 429 storm reported as it is waited out, a dead endpoint stopped before any evaluation, and a spent
budget stopping the command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.llm_server import free_port
from tests.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = str(ROOT / "seeds" / "vector_search.py")


def eval_cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mstar_ray.cli", "eval", PROGRAM, "--task", "synthetic", "--embedder", "hashing", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def write_config(tmp_path: Path, settings: dict) -> str:
    path = tmp_path / "llm.yaml"
    path.write_text(yaml.safe_dump(settings))
    return str(path)


def test_a_misspelt_key_is_named_with_its_path_and_the_nearest_valid_key(tmp_path):
    config = write_config(tmp_path, {"task": {"base_url": "http://x/v1", "model": "m", "timout_s": 3},
                                     "budget": {"max_usd": -1}})
    done = eval_cli("--llm-config", config)
    assert done.returncode == 2
    assert "task.timout_s: unknown key; did you mean 'timeout_s'?" in done.stderr
    assert "budget.max_usd" in done.stderr


def test_a_dead_endpoint_stops_before_any_evaluation(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    config = write_config(tmp_path, {"task": {"base_url": url, "model": "m"},
                                     "judge": {"base_url": url, "model": "m", "api_key_env": "PATH"}})
    done = eval_cli("--llm-config", config, "--limit", "2")
    assert done.returncode == 3
    assert "role 'task'" in done.stderr and url in done.stderr and "unreachable" in done.stderr
    assert "F1" not in done.stdout


def test_a_429_storm_is_reported_as_it_is_waited_out(tmp_path):
    with ScriptedServer() as server:
        server.fail_next(4, 429, {"retry-after-ms": "200"})
        # timeout_s set: no speed check at start-up takes the first 429s
        config = write_config(tmp_path, {"task": {"base_url": server.base_url, "model": "scripted", "max_retries": 6,
                                                  "timeout_s": 30}})
        done = eval_cli("--llm-config", config, "--limit", "2", "--seed", "3")
    assert done.returncode == 0, done.stderr
    retries = [line for line in done.stderr.splitlines() if "HTTP 429" in line]
    assert len(retries) == 4 and all("retry" in line and server.base_url in line for line in retries)
    assert "overall" in done.stdout


def test_a_spent_budget_stops_the_command(tmp_path):
    with ScriptedServer() as server:
        config = write_config(tmp_path, {
            "task": {"base_url": server.base_url, "model": "scripted", "timeout_s": 30},  # no speed check
            "prices": {"scripted": {"input_per_mtok": 1000, "output_per_mtok": 1000}},
            "budget": {"max_usd": 0.1},
        })
        done = eval_cli("--llm-config", config, "--limit", "2")
        assert done.returncode == 4
        assert "budget spent" in done.stderr
        assert server.requests == 7  # $0.015 a call: the 7th crosses $0.10, the 8th is refused
