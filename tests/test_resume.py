"""Resume: a real driver process SIGKILLed mid-run and resumed ends with exactly the population of an
uninterrupted run (R = E = 1, offline); nothing is evaluated twice or lost; only the budget may change."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from mstar_ray.config_file import ConfigError
from mstar_ray.driver.resume import merge_resume_config
from mstar_ray.run_config import RunConfig
from mstar_ray.runlog.schemas import EventRow
from mstar_ray.state.replay import wall_seconds
from scripts.fault_resume import check, config, population, table

ROOT = Path(__file__).resolve().parents[1]

CLI = [sys.executable, "-m", "mstar_ray.cli", "run"]


def test_a_driver_killed_mid_run_resumes_to_the_uninterrupted_result(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config(6)))
    reference = tmp_path / "reference"
    subprocess.run([*CLI, str(path), "--run-dir", str(reference)], check=True, capture_output=True, cwd=ROOT, timeout=300)
    for attempt in range(3):  # a starved test process may see the 4th row only once the driver has finished
        faulty = tmp_path / f"faulty-{attempt}"
        at_kill = _killed_after_rows(path, faulty, 4)
        assert at_kill >= 4, "the driver ended before its 4th candidate row"
        if at_kill < len(table(reference, "candidates")):
            break
    else:
        pytest.fail("the kill never landed mid-run in 3 attempts")
    done = subprocess.run([*CLI, "--resume", str(faulty)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resumed:" in done.stderr
    assert check(faulty) == []
    assert population(faulty) == population(reference)
    assert [e["kind"] for e in table(faulty, "events")].count("resumed") == 1
    # issue 15, item 7: the summary's wall time counts both processes, not only the resumed one
    events = table(faulty, "events")
    resumed = next(i for i, e in enumerate(events) if e["kind"] == "resumed")
    first = (events[resumed - 1]["at"] - events[0]["at"]).total_seconds()
    second = (events[-1]["at"] - events[resumed]["at"]).total_seconds()
    summary = json.loads((faulty / "summary.json").read_text())
    assert summary["wall_seconds"] >= first + second - 0.5 and first > 0


def _killed_after_rows(config_path: Path, run_dir: Path, rows: int) -> int:
    """Start a driver and SIGKILL it once ``rows`` candidate rows are written: the rows there at the kill."""
    driver = subprocess.Popen([*CLI, str(config_path), "--run-dir", str(run_dir)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + 240
    while len(table(run_dir, "candidates")) < rows and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.05)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    return len(table(run_dir, "candidates"))


def test_a_driver_stopped_before_it_queued_its_seeds_resumes_with_them(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config(1)))
    run_dir = tmp_path / "run"
    # config.yaml marks a run directory (seeds.json is written just before it); the split comes after Ray starts.
    # A driver that stops there, whatever the machine's load: one whose Ray address nothing answers on.
    stopped = subprocess.run([*CLI, str(path), "--run-dir", str(run_dir), "--address", "127.0.0.1:9"],
                             capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert stopped.returncode == 3 and (run_dir / "config.yaml").exists(), stopped.stderr[-2000:]
    assert (run_dir / "seeds.json").exists() and table(run_dir, "candidates") == []
    assert not (run_dir / "split.json").exists(), "the kill must land before the split and the seeds' queueing"
    # a resume with a new budget that cannot start (no Ray at that address) leaves the stored config as it was
    stored = (run_dir / "config.yaml").read_bytes()
    more = tmp_path / "more.yaml"
    more.write_text(yaml.safe_dump({**config(1), "search": {**config(1)["search"], "max_candidates": 3}}))
    failed = subprocess.run([*CLI, str(more), "--resume", str(run_dir), "--address", "127.0.0.1:9"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert failed.returncode != 0 and (run_dir / "config.yaml").read_bytes() == stored
    done = subprocess.run([*CLI, "--resume", str(run_dir)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert check(run_dir) == []
    seeds = [row["commit_message"] for row in table(run_dir, "candidates") if row["origin"] == "seed"]
    assert seeds == ["seed vector_search", "seed experience_learner"]


def test_wall_seconds_count_each_process_from_its_first_event_to_its_last():
    start = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)

    def at(kind: str, seconds: float) -> EventRow:
        return EventRow(kind=kind, at=start + timedelta(seconds=seconds))

    # a first process killed after 100 s, a resume 1000 s later that ran 50 s, then another of 7 s
    events = [at("submitted", 0), at("finished", 100), at("resumed", 1100), at("finished", 1150),
              at("resumed", 2000), at("stopped", 2007)]
    assert wall_seconds(events) == 157
    assert wall_seconds([]) == 0


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
