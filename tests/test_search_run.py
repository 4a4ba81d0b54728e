"""Whole searches on a real local Ray: the offline reflector, evaluator and reflector pools, the
population, the budget, the held-out test, and the run directory; an evaluator killed mid-evaluation."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest
import yaml

from mstar_ray.cli import main
from scripts.fault_resume import table  # (logs read with plain pyarrow, as any outside tool would)
from tests.conftest import SEEDS

ROOT = Path(__file__).resolve().parents[1]


def write_config(tmp_path: Path, **search) -> str:
    config = {
        "task": {"name": "synthetic", "seed": 1},
        "split": {"static_size": 6, "rotating_size": 2, "train_ratio": 2.0},
        "search": {"seeds": [str(SEEDS / "vector_search.py"), str(SEEDS / "experience_learner.py")],
                   "max_candidates": 4, "reflections_in_flight": 2, "evaluations_in_flight": 2, **search},
        "llm": {"embedding": {"kind": "hashing"}},
        "ray": {"num_cpus": 2},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def discards(run_dir: Path) -> list[dict]:
    return [json.loads(e["data"]) for e in table(run_dir, "events") if e["transition"] == "Discarded"]


def test_a_small_search_runs_end_to_end(tmp_path, capsys, monkeypatch):
    from mstar_ray.actors.pool import WorkerPool
    from mstar_ray.actors.run_services import Remote

    asked = {"snapshots": 0, "turns": 0}
    remote_call, next_finished = Remote.call, WorkerPool.next_finished

    def call(self, method, *args):
        asked["snapshots"] += method == "snapshot"
        return remote_call(self, method, *args)

    def turn(self, *args):
        asked["turns"] += 1
        return next_finished(self, *args)

    monkeypatch.setattr(Remote, "call", call)
    monkeypatch.setattr(WorkerPool, "next_finished", turn)
    run_dir = tmp_path / "run"
    assert main(["run", write_config(tmp_path), "--run-dir", str(run_dir)]) == 0
    # one snapshot of the gateway per turn of the loop (and one before it, one at the end), not one for the live
    # line and another for each budget check
    assert asked["turns"] > 5 and asked["snapshots"] <= asked["turns"] + 2
    summary = json.loads((run_dir / "summary.json").read_text())
    candidates = table(run_dir, "candidates")
    ids = [c["id"] for c in candidates if c["status"] != "duplicate"]
    assert len(ids) == len(set(ids))  # none evaluated twice
    assert sum(c["origin"] == "seed" for c in candidates) == 2
    children = [c for c in candidates if c["origin"] != "seed" and c["status"] != "duplicate"]
    assert summary["candidates_evaluated"] == len(children) == 4
    assert all(c["parent"] in ids and c["patch"].startswith("*** Begin Patch") for c in children)
    results = table(run_dir, "results")
    assert {"static", "rotating", "test"} <= {r["split"] for r in results} <= {"static", "rotating", "confirmation", "test"}
    tested = {r["candidate"] for r in results if r["split"] == "test"}
    assert tested == {summary["best"]["id"], summary["best_seed"]["id"]}
    assert summary["best"]["static_score"] >= summary["best_seed"]["static_score"]
    assert 0.0 <= summary["best"]["test_score"] <= 1.0 and 0.0 <= summary["best_seed"]["test_score"] <= 1.0
    assert (run_dir / "best.py").read_text() == (run_dir / "programs" / f"{summary['best']['id']}.py").read_text()
    events = table(run_dir, "events")
    finished = [e["candidate"] for e in events if e["kind"] == "finished" and e["work"] == "evaluation"
                and e["purpose"] == "search"]
    assert sorted(finished) == sorted(ids) and events[-1]["kind"] == "stopped"
    split = json.loads((run_dir / "split.json").read_text())
    assert len(split["static"]) == 6 and not set(split["static"]) & set(split["test"])
    assert "max_candidates (4) reached" in summary["stop_reason"]
    # the fitness: every static score with its interval, the texts written with the static evidence in them
    evaluated = [c for c in candidates if c["status"] == "evaluated"]
    assert all(c["static_low"] <= c["static_score"] <= c["static_high"] for c in evaluated)
    assert all(set(split["train_texts"]) <= set(c["texts_written"]) and c["static_evidence"] == 1.0 for c in evaluated)
    assert split["static_evidence"] == summary["static_evidence_in_memory"] == 1.0
    # how the final program was chosen
    selection = summary["selection"]
    assert selection["chosen"] == summary["best"]["id"] and selection["how"]
    assert selection["rule"] in ("best seed", "paired bootstrap", "confirmation")
    assert selection["replacements"][0]["incumbent"] is None and all(c["verdict"] for c in evaluated)
    if selection["rule"] == "confirmation":
        assert {r["split"] for r in results if r["candidate"] == selection["chosen"]} >= {"confirmation"}


def test_a_reflector_that_never_gives_a_child_cannot_spin_for_ever(tmp_path):
    from tests.scripted_server import ScriptedServer

    with ScriptedServer(reply="I would make read() better.") as server:
        config = yaml.safe_load(Path(write_config(tmp_path, reflector="llm", max_candidates=1, max_repairs=0,
                                                  reflections_in_flight=1)).read_text())
        config["llm"]["reflector"] = {"base_url": server.base_url, "model": "scripted", "json_mode": False,
                                      "timeout_s": 30}  # no speed check at start-up
        path = tmp_path / "spin.yaml"
        path.write_text(yaml.safe_dump(config))
        run_dir = tmp_path / "run"
        assert main(["run", str(path), "--run-dir", str(run_dir)]) == 0
        requests = server.requests
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["discarded"] == 5 and summary["candidates_evaluated"] == 0
    assert "5 reflections gave fewer than max_candidates (1)" in summary["stop_reason"]
    assert requests == 5  # one reply per reflection (no repairs): nothing more was spent


def test_a_bad_config_names_the_key_and_starts_nothing(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"search": {"max_candidate": 3, "tau": 0}}))
    assert main(["run", str(path), "--run-dir", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err
    assert "search.max_candidate: unknown key; did you mean 'max_candidates'?" in err
    assert "search.tau" in err
    assert not (tmp_path / "never").exists()


@pytest.mark.slow
def test_a_search_with_a_real_reflector_model(tmp_path, llm_server):
    """SmolLM2-135M (2,048-token context here) writes poor patches, and a full reflection prompt may not
    even fit its context: what matters is that every reply or refusal is checked and accounted for, and
    the run ends cleanly."""
    config = yaml.safe_load(Path(write_config(tmp_path, reflector="llm", max_candidates=1, max_iterations=2,
                                              max_repairs=1, reflections_in_flight=1)).read_text())
    config["llm"]["reflector"] = {"base_url": llm_server.base_url, "model": llm_server.model, "max_tokens": 160,
                                  "temperature": 0.7, "json_mode": False}
    path = tmp_path / "llm.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir = tmp_path / "run"
    assert main(["run", str(path), "--run-dir", str(run_dir)]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    discarded = discards(run_dir)
    assert summary["candidates_evaluated"] + summary["discarded"] >= 1
    assert summary["discarded"] == len(discarded)
    assert all(d["errors"] and d["attempts"] <= 2 for d in discarded)
    refused = [d for d in discarded if "refused the request" in d["reason"]]
    assert all("context" in d["reason"] and "role 'reflector'" in d["reason"] for d in refused)


SLOW_WRITES = '''
def _busy():
    total = 0
    for i in range(4_000_000):
        total += i
    return total
'''


def test_an_evaluator_killed_mid_evaluation_is_restarted_and_its_work_reissued(tmp_path):
    import ray

    from mstar_ray.actors.evaluator_actor import EvaluatorActor
    from mstar_ray.actors.run_services import start_run_services
    from mstar_ray.llm.settings import LLMSettings
    from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
    from mstar_ray.search.jobs import EvalJob
    from mstar_ray.families.task_registry import load_task

    source = (SEEDS / "vector_search.py").read_text().replace("\nclass KnowledgeBase:", SLOW_WRITES + "\nclass KnowledgeBase:")
    source = source.replace("        pieces = chunk(raw_text, CHUNK_CHARS)", "        _busy()\n        pieces = chunk(raw_text, CHUNK_CHARS)")
    task = load_task("synthetic", seed=1)
    settings = LLMSettings(embedding={"kind": "hashing"})
    from mstar_ray.driver.cluster import start_local_ray

    start_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        cache, gateway = start_run_services(tmp_path, settings)
        actor = EvaluatorActor.options(max_restarts=2, max_task_retries=2).remote(settings, SandboxLimits(), cache.name, gateway.name)
        first_pid = ray.get(actor.pid.remote())
        job = EvalJob(candidate_id="slow", source=source, purpose="search", task_name="t", texts=task.texts[:8],
                      items=task.items[:2], static_ids=[q.id for q in task.items[:2]])
        pending = actor.evaluate.remote(job)
        threading.Timer(1.0, os.kill, (first_pid, signal.SIGKILL)).start()
        outcome = ray.get(pending, timeout=240)
        assert outcome.worker_pid != first_pid  # finished by the restarted actor
        assert outcome.report.violation is None and outcome.report.texts_written == 8
    finally:
        ray.shutdown()


@pytest.fixture(autouse=True)
def _no_stray_ray():
    import ray

    yield
    if ray.is_initialized():
        ray.shutdown()


def test_reflector_calls_name_parent_and_child_echoed_messages_are_replaced_and_ray_does_not_warn(tmp_path):
    """issue 15, item 7: reflector rows in llm_calls had no ids; a child's COMMIT_MESSAGE that echoed the
    repair prompt became a family label; Ray warned of constructor arguments in the object store."""
    import subprocess

    from tests.scripted_server import ScriptedServer

    echo = "COMMIT_MESSAGE: Attempt 2 of 3 failed: the change leaves the program as it was\n```python\nTOP_K = 8\n```\n"
    with ScriptedServer(reply=echo) as server:
        config = yaml.safe_load(Path(write_config(tmp_path, reflector="llm", max_candidates=2, max_repairs=0,
                                                  reflections_in_flight=1, evaluations_in_flight=1)).read_text())
        config["llm"]["reflector"] = {"base_url": server.base_url, "model": "scripted", "json_mode": False,
                                      "edit_format": "function", "timeout_s": 30}
        path = tmp_path / "echo.yaml"
        path.write_text(yaml.safe_dump(config))
        run_dir = tmp_path / "run"
        done = subprocess.run([sys.executable, "-m", "mstar_ray.cli", "run", str(path), "--run-dir", str(run_dir)],
                              capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "constructor arguments in the object store" not in done.stderr
    candidates = {c["id"]: c for c in table(run_dir, "candidates")}
    children = [c for c in candidates.values() if c["origin"] == "reflection"]
    assert children and all(c["commit_message"] == "changed TOP_K (no message of its own)" for c in children)
    calls = [c for c in table(run_dir, "llm_calls") if c["role"] == "reflector"]
    assert calls and all(c["parent"] in candidates for c in calls)  # a seed, or a child reflected on in turn
    assert {c["candidate"] for c in calls} <= {c["id"] for c in children} | {None}
    assert {c["candidate"] for c in calls} & {c["id"] for c in children}
