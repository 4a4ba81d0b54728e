"""A candidate never stops a run, at any phase: a program that sends what no encoder takes only under the final
test (a poison pill, honest for the whole search) is that program's violation there, and the run still ends with
its summary and a tested program, the next by the selection rule, saying why; ``eval`` reports the same
violation with its JSON; and a prompt that the endpoint refuses because the program's declarations made it too
large is the program's violation, where a refusal for the endpoint's configuration still stops the command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mstar_ray.cli import main
from mstar_ray.program_id import program_id
from mstar_ray.sandbox_host.process import PROBE
from tests.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "tests" / "hostile"

# A seed that remembers nothing (the sandbox's probe program): honest, and weaker than the pill's keyword memory.
FORGETFUL = PROBE


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mstar_ray.cli", *args], capture_output=True, text=True, timeout=600)


def test_eval_reports_a_poison_pill_as_the_programs_violation():
    """The issue's case: the MiniLM embedder (the default) used to raise on the text and ``eval`` died with
    exit 2 and no JSON."""
    done = cli("eval", str(HOSTILE / "poison_pill.py"), "--task", "synthetic", "--json")
    assert done.returncode == 1, done.stderr[-3000:]
    report = json.loads(done.stdout)
    violation = report["violation"]
    assert violation["phase"] == "read" and violation["kind"] == "protocol"
    assert "not valid Unicode" in violation["message"]
    assert report["score"] == 0.0


def test_a_poison_pill_under_the_final_test_gives_way_to_the_next_program(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture):
    forgetful = tmp_path / "forgetful.py"
    forgetful.write_text(FORGETFUL)
    poison = (HOSTILE / "poison_pill.py").read_text()
    config = {
        "task": {"name": "synthetic", "seed": 1},
        # 20 test questions: more reads than any search evaluation makes, so the pill waits for the test
        "split": {"static_size": 6, "rotating_size": 2, "train_ratio": 2.0, "test_fraction": 0.5,
                  "confirmation_size": 0},
        "search": {"seeds": [str(HOSTILE / "poison_pill.py"), str(forgetful)], "max_candidates": 2,
                   "reflections_in_flight": 1, "evaluations_in_flight": 2},
        "llm": {"embedding": {"kind": "hashing"}},
        "ray": {"num_cpus": 2},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir = tmp_path / "run"
    code = main(["run", str(path), "--run-dir", str(run_dir)])
    output = capsys.readouterr()
    assert code == 0, output.out[-3000:] + output.err[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    pill = program_id(poison)
    assert summary["best_seed"]["id"] == pill  # the search's choice: the best seed by static score
    assert "protocol" in summary["best_seed"]["failure_after_search"]
    assert "not valid Unicode" in summary["best_seed"]["failure_after_search"]
    best = summary["best"]
    assert best["id"] != pill and "POISON_AFTER_READS" not in (run_dir / "best.py").read_text()
    assert best["test_score"] is not None and best["failure_after_search"] is None
    assert f"{pill} was passed over" in summary["selection"]["how"]


def write_llm_config(tmp_path: Path, server: ScriptedServer) -> str:
    path = tmp_path / "llm.yaml"
    # timeout_s set: no speed check at start-up
    path.write_text(yaml.safe_dump({"task": {"base_url": server.base_url, "model": "scripted", "timeout_s": 30}}))
    return str(path)


def test_a_prompt_too_large_for_the_model_because_of_the_programs_declarations_is_its_violation(tmp_path: Path):
    with ScriptedServer(context_chars=20_000) as server:
        config = write_llm_config(tmp_path, server)
        honest = cli("eval", str(ROOT / "seeds" / "vector_search.py"), "--task", "synthetic", "--limit", "4",
                     "--embedder", "hashing", "--llm-config", config)
        glossary = cli("eval", str(HOSTILE / "long_glossary.py"), "--task", "synthetic", "--limit", "4",
                       "--embedder", "hashing", "--llm-config", config, "--json")
    assert honest.returncode == 0, honest.stderr[-3000:]  # the same endpoint serves an honest program
    assert glossary.returncode == 1, glossary.stderr[-3000:]  # the program's violation, not exit 3
    violation = json.loads(glossary.stdout)["violation"]
    assert violation["kind"] == "prompt_refused" and "HTTP 400" in violation["message"]


def test_a_refusal_for_the_endpoints_configuration_still_stops_the_command(tmp_path: Path):
    with ScriptedServer() as server:
        server.fail_next(50, 404)  # an unknown model: every request of every program would be refused
        config = write_llm_config(tmp_path, server)
        done = cli("eval", str(HOSTILE / "long_glossary.py"), "--task", "synthetic", "--limit", "2",
                   "--embedder", "hashing", "--llm-config", config)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "HTTP 404" in done.stderr
