"""Episodes from the command line: ``mstar-ray eval --task twc``, the errors a machine without Java or without
textworld-express gets before anything runs, and a short search on TWC end to end (run, status, report)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mstar_ray.cli import main
from scripts.fault_resume import table
from tests.conftest import SEEDS

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, env: dict | None = None, prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}import sys\nfrom mstar_ray.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=600)


def test_without_java_eval_stops_before_anything_runs_and_names_the_fix():
    done = cli("eval", str(SEEDS / "vector_search.py"), "--task", "twc", env={"PATH": "/nonexistent"})
    assert done.returncode == 3
    assert "no `java` is on PATH" in done.stderr and "openjdk-17-jre-headless" in done.stderr
    assert "writing texts" not in done.stderr and "overall" not in done.stdout


def test_without_textworld_express_eval_names_the_package():
    # an interpreter in which the package cannot be imported, as if it were not installed
    done = cli("eval", str(SEEDS / "vector_search.py"), "--task", "coin", prelude="import sys\nsys.modules['textworld_express'] = None\n")
    assert done.returncode == 3
    assert "TextWorldExpress is not installed: pip install textworld-express" in done.stderr


@pytest.mark.slow
def test_eval_on_twc_from_the_command_line():
    done = cli("eval", str(SEEDS / "vector_search.py"), "--task", "twc", "--embedder", "hashing")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "task      twc (30 texts written, 60 items; family episode, scored by success)" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.split()[:1] in (["seen"], ["unseen"])}
    assert rows["seen"][0] == "40" and rows["unseen"][0] == "20"
    assert "act " in out and "evaluating items 60/60" in done.stderr


def write_config(tmp_path: Path) -> str:
    config = {
        "task": {"name": "twc", "train_games": 12, "validation_games": 10, "test_games": 4},
        "split": {"static_size": 6, "rotating_size": 2, "train_ratio": 1.5, "confirmation_size": 2},
        "search": {"seeds": [str(SEEDS / "vector_search.py"), str(SEEDS / "experience_learner.py")],
                   "max_candidates": 3, "reflections_in_flight": 1, "evaluations_in_flight": 2},
        "llm": {"embedding": {"kind": "hashing"}},
        "ray": {"num_cpus": 2},
    }
    path = tmp_path / "twc.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


@pytest.mark.slow
def test_a_short_search_on_twc_end_to_end(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["run", write_config(tmp_path), "--run-dir", str(run_dir)]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    split = json.loads((run_dir / "split.json").read_text())
    assert len(split["test"]) == 8 and all(t.startswith("twc-") for t in split["train_texts"])
    assert summary["candidates_evaluated"] == 3 and 0.0 <= summary["best"]["test_score"] <= 1.0
    results = table(run_dir, "results")
    test = [r for r in results if r["split"] == "test" and r["candidate"] == summary["best"]["id"]]
    assert sorted({r["category"] for r in test}) == ["seen", "unseen"] and len(test) == 8
    assert all(r["trace"].startswith("OBJECTIVE: ") and "\nOUTCOME: " in r["trace"] for r in results)
    assert all(r["score"] in (0.0, 1.0) for r in results)
    capsys.readouterr()
    assert main(["status", str(run_dir)]) == 0
    status = capsys.readouterr().out
    assert "task      twc" in status and "(finished)" in status
    unseen = sum(r["score"] for r in test if r["category"] == "unseen") / 4
    assert summary["best"]["test_categories"]["unseen"] == unseen  # the test's seen and unseen games, apart
    assert f"unseen {unseen:.3f}" in status.split("test      ")[1].split(" · best seed")[0]
    assert main(["report", str(run_dir)]) == 0
    assert (run_dir / "report.html").stat().st_size > 10_000


@pytest.mark.slow
def test_the_llm_actor_plays_every_step_through_the_runs_client(llm_server):
    from mstar_ray.agent.evaluation import evaluate
    from mstar_ray.agent.llm_backend import LLMBackend
    from mstar_ray.embedding.hashing import HashingEmbedder
    from mstar_ray.families.episode import ACT_MAX_TOKENS
    from mstar_ray.llm.cache import MemoryCache
    from mstar_ray.llm.client import LLMClient
    from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig
    from mstar_ray.families.task_registry import load_task
    from tests.conftest import seed_source

    task = load_task("twc", train_games=2, validation_games=1, test_games=0, step_limit=3)
    cache = MemoryCache()
    config = EndpointConfig(base_url=llm_server.base_url, model=llm_server.model, max_tokens=96, max_retries=1)

    def play():
        client = LLMClient(ChatEndpoint("task", config), cache=cache)
        backend = LLMBackend(client)
        report = evaluate(seed_source("experience_learner"), task, backend, HashingEmbedder())
        assert report.violation is None, report.violation
        return report, client.drain_calls()

    report, calls = play()
    (result,) = report.results
    acts = [call for call in calls if call.step == "act"]
    assert report.calls["act"] == report.llm["act"].requests == len(acts) == 3  # no twc game is won in 3 actions
    assert all(call.prompt_tokens > 0 and call.completion_tokens <= ACT_MAX_TOKENS for call in acts)
    assert result.score == 0.0 and "step limit (3 actions)" in result.prediction
    lines = [line for line in result.trace.splitlines() if line.startswith("ACTION: ")]
    assert len(lines) == 3  # a reply naming no admissible action says so on its line ("... explored")
    again, calls = play()  # the same requests: every one answered from the run's cache
    assert again.llm["act"].cache_hits == 3 and not [call for call in calls if call.step == "act" and not call.cache_hit]
