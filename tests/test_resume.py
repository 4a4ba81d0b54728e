"""Resume: a real driver process SIGKILLed mid-run and resumed ends with exactly the population of an
uninterrupted run (R = E = 1, offline); nothing is evaluated twice or lost; only the budget may change."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mstar_ray.config_file import ConfigError
from mstar_ray.driver.resume import merge_resume_config
from mstar_ray.run_config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from fault_resume import check, config, population, table  # noqa: E402

CLI = [sys.executable, "-m", "mstar_ray.cli", "run"]


def test_a_driver_killed_mid_run_resumes_to_the_uninterrupted_result(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config(10)))
    reference, faulty = tmp_path / "reference", tmp_path / "faulty"
    subprocess.run([*CLI, str(path), "--run-dir", str(reference)], check=True, capture_output=True, cwd=ROOT, timeout=300)
    driver = subprocess.Popen([*CLI, str(path), "--run-dir", str(faulty)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + 240
    while len(table(faulty, "candidates")) < 5 and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.05)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    at_kill = len(table(faulty, "candidates"))
    assert 5 <= at_kill < len(table(reference, "candidates")), "the kill must land mid-run"
    done = subprocess.run([*CLI, "--resume", str(faulty)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resumed:" in done.stderr
    assert check(faulty) == []
    assert population(faulty) == population(reference)
    assert [e["kind"] for e in table(faulty, "events")].count("resumed") == 1


def test_on_resume_only_the_budget_may_change():
    stored = RunConfig()
    more = RunConfig.model_validate({"search": {"max_candidates": 50}, "llm": {"budget": {"max_usd": 3}}})
    merged = merge_resume_config(stored, more)
    assert merged.search.max_candidates == 50 and merged.llm.budget.max_usd == 3
    with pytest.raises(ConfigError) as caught:
        merge_resume_config(stored, RunConfig.model_validate({"search": {"tau": 0.3}, "split": {"static_size": 5}}))
    assert "search.tau" in str(caught.value) and "split.static_size" in str(caught.value)


def test_a_run_directory_is_never_overwritten(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config(1)))
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "config.yaml").write_text("task: {}\n")
    done = subprocess.run([*CLI, str(path), "--run-dir", str(tmp_path / "old")], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "--resume" in done.stderr
