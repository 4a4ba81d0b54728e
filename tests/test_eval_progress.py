"""Progress inside an evaluation: a real evaluator actor posts to the run's progress board while it is
busy, and a real search shows each evaluation's own progress in its live line and in ``status``."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mstar_ray.inspect.status import status_text
from tests.conftest import SEEDS

ROOT = Path(__file__).resolve().parents[1]
BUSY = '''
def _busy():
    total = 0
    for i in range({iterations}):
        total += i
    return total
'''


def slow_program(iterations: int) -> str:
    """The vector-search seed with a busy loop in every write: an evaluation then lasts long enough to watch."""
    busy = BUSY.format(iterations=iterations)
    source = (SEEDS / "vector_search.py").read_text().replace("\nclass KnowledgeBase:", busy + "\nclass KnowledgeBase:")
    return source.replace("        pieces = chunk(raw_text, CHUNK_CHARS)", "        _busy()\n        pieces = chunk(raw_text, CHUNK_CHARS)")


def test_a_busy_evaluator_reports_its_progress_through_the_board(tmp_path):
    import ray

    from mstar_ray.actors.evaluator_actor import EvaluatorActor
    from mstar_ray.actors.progress_board import start_progress_board
    from mstar_ray.actors.run_services import start_run_services
    from mstar_ray.llm.settings import LLMSettings
    from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
    from mstar_ray.search.jobs import EvalJob
    from mstar_ray.families.task_registry import load_task

    task = load_task("synthetic", seed=1, granularity="turn")
    settings = LLMSettings(embedding={"kind": "hashing"})
    from mstar_ray.driver.cluster import start_local_ray

    start_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        cache, gateway = start_run_services(tmp_path, settings)
        board, board_name = start_progress_board()
        actor = EvaluatorActor.remote(settings, SandboxLimits(), cache.name, gateway.name, board_name)
        job = EvalJob(candidate_id="slow", source=slow_program(1_500_000), purpose="test", task_name="t", texts=task.texts[:40],
                      items=task.items[:3], static_ids=[q.id for q in task.items[:3]])
        pending = actor.evaluate.remote(job)
        seen = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            done, _ = ray.wait([pending], timeout=0.2)
            entry = ray.get(board.snapshot.remote()).get("test:slow")
            if entry is not None:
                seen.append((entry.texts_done, entry.items_done))
            if done:
                break
        outcome = ray.get(pending)
        assert outcome.report.texts_written == 40
        partial = [texts for texts, _ in seen if 0 < texts < 40]
        assert partial and partial == sorted(partial)  # seen while busy, never going back
        assert all(e.texts_total == 40 for e in [ray.get(board.snapshot.remote()).get("test:slow")] if e)
        deadline = time.monotonic() + 30
        while ray.get(board.snapshot.remote()) and time.monotonic() < deadline:
            time.sleep(0.1)  # the clearing post travels on its own
        assert ray.get(board.snapshot.remote()) == {}
    finally:
        ray.shutdown()


def test_a_live_run_shows_each_evaluations_progress_in_its_line_and_in_status(tmp_path):
    program = tmp_path / "slow.py"
    program.write_text(slow_program(15_000_000))  # about 1 s per write: the search sees 8 texts, the test 16
    config = {
        "task": {"name": "synthetic", "seed": 1},
        "split": {"static_size": 4, "rotating_size": 1, "confirmation_size": 0},
        "search": {"seeds": [str(program)], "max_candidates": 1, "reflections_in_flight": 1, "evaluations_in_flight": 1},
        "llm": {"embedding": {"kind": "hashing"}},
        "ray": {"num_cpus": 2},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir = tmp_path / "run"
    log = tmp_path / "driver.log"
    with log.open("w") as stderr:
        driver = subprocess.Popen([sys.executable, "-m", "mstar_ray.cli", "run", str(path), "--run-dir", str(run_dir)],
                                  stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT)
    statuses = []
    try:
        deadline = time.monotonic() + 400
        while driver.poll() is None and time.monotonic() < deadline:
            if (run_dir / "split.json").exists():
                statuses.append(status_text(run_dir))
            time.sleep(0.5)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.wait() == 0, log.read_text()[-3000:]
    watched = [line for text in statuses for line in text.splitlines() if line.startswith("evaluating")]
    assert any(line.startswith("evaluating search ") and "texts " in line and "ETA" in line for line in watched), statuses[-3:]
    assert any(line.startswith("evaluating test ") for line in watched), watched
    lines = log.read_text().splitlines()
    # The log prints a line at most every 5 s: the search's evaluation lasts long enough to be in one, the
    # test's may not (status above saw it); the test phase itself is always announced.
    assert any(line.startswith("[searching]") and " · search " in line and "questions" in line for line in lines)
    assert any(line.startswith("[testing the best]") for line in lines)
    assert not (run_dir / "live.json").exists()  # nothing live is left behind
    assert "evaluating" not in status_text(run_dir)


@pytest.fixture(autouse=True)
def _no_stray_ray():
    import ray

    yield
    if ray.is_initialized():
        ray.shutdown()
