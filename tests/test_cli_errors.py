"""Errors say what failed: exit 2 only for input the user can fix (naming the file, key or argument), and
any other exception exit 3, one line naming the component, its full traceback in the run directory's
error.log (and on stderr with --debug)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from mstar_ray.cli import main
from mstar_ray.exit_codes import InputError, MissingInput
from tests.conftest import ROOT


def test_bad_input_exits_2_naming_the_key_the_file_or_the_argument(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"task": {"name": "synthetic"}, "search": {"max_candidatez": 3}}))
    assert main(["run", str(config), "--run-dir", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert f"{config}: invalid config" in err and "search.max_candidatez: unknown key; did you mean 'max_candidates'?" in err
    assert "  line 2: search.max_candidatez: unknown key" in err  # the line of the file the key is on

    missing = tmp_path / "no-such-task"
    config.write_text(yaml.safe_dump({"task": {"name": "jsonl", "data": str(missing)}, "search": {"max_candidates": 3}}))
    assert main(["run", str(config), "--run-dir", str(tmp_path / "b")]) == 2
    assert str(missing) in capsys.readouterr().err

    texts = tmp_path / "task"
    texts.mkdir()
    (texts / "texts.jsonl").write_text('{"id": "t1", "text": "hello"}\n{"id": "t2", "text": \n')
    (texts / "questions.jsonl").write_text("")
    assert main(["eval", str(ROOT / "seeds" / "vector_search.py"), "--task", "jsonl", "--data", str(texts),
                 "--embedder", "hashing"]) == 2
    assert f"{texts / 'texts.jsonl'} line 2: not JSON" in capsys.readouterr().err

    assert main(["eval", str(ROOT / "seeds" / "vector_search.py"), "--texts", "0", "--embedder", "hashing"]) == 2
    assert "--texts must be at least 1, got 0" in capsys.readouterr().err

    # --embedder openai alone names no endpoint: the user's to fix, said before any request is tried
    assert main(["eval", str(ROOT / "seeds" / "vector_search.py"), "--embedder", "openai"]) == 2
    assert "embedding kind 'openai' needs base_url and model" in capsys.readouterr().err
    assert not list(tmp_path.glob("*/error.log"))  # bad input leaves no traceback: nothing to report


def test_an_internal_failure_exits_3_naming_the_component_with_its_traceback_kept(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(ROOT / "experiments" / "quickstart.yaml", run_dir / "config.yaml")
    (run_dir / "candidates.arrows").mkdir()  # not something a user gives: a state the code never expects
    assert main(["status", str(run_dir)]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("internal error in mstar_ray.runlog.reader (") and "candidates.arrows" in err[0]
    assert err[1] == f"the full traceback is in {run_dir / 'error.log'} (--debug prints it here); please report it"
    logged = (run_dir / "error.log").read_text()
    assert logged.count("Traceback (most recent call last)") == 1 and "mstar_ray/runlog/reader.py" in logged

    assert main(["status", str(run_dir), "--debug"]) == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "mstar_ray/runlog/reader.py" in err
    assert (run_dir / "error.log").read_text().count("Traceback (most recent call last)") == 2  # appended


def test_an_input_error_is_a_value_error_and_a_missing_input_a_file_not_found_error():
    # callers that catch the builtin types keep working; only the CLI tells them apart from bugs
    assert issubclass(InputError, ValueError) and issubclass(MissingInput, FileNotFoundError)
    with pytest.raises(MissingInput, match="seed file nowhere.py not found"):
        from mstar_ray.seeds import resolve

        resolve("nowhere.py", Path("/nonexistent"))


def test_messages_name_the_users_file_and_what_is_not_a_run_directory(tmp_path, capsys):
    program = tmp_path / "notmemory.py"
    program.write_text("def f():\n    return 1\n")
    assert main(["eval", str(program), "--embedder", "hashing"]) == 1
    err = capsys.readouterr().err
    assert f"{program} breaks the memory-program contract" in err and "program.py" not in err
    empty, missing = tmp_path / "empty", tmp_path / "missing"
    empty.mkdir()
    for folder in (empty, missing):
        for command in (["report", str(folder)], ["status", str(folder)], ["export", str(folder), "--best",
                                                                            str(tmp_path / "b.py")],
                        ["serve", str(folder), "--port", "0"], ["run", "--resume", str(folder)]):
            assert main(command) == 2, command
            assert f"{folder} is not a run directory" in capsys.readouterr().err, command
def test_the_error_path_cannot_fail_when_the_working_directory_vanished(tmp_path):
    """The issue's case: Ray's clean-up removed a running driver's working directory, and reporting the first
    error raised FileNotFoundError from ``Path.resolve()`` (two tracebacks, no line naming the component). Here a
    component fails in a frame whose file name is relative, in a process whose working directory is gone."""
    gone = tmp_path / "working_dir"
    script = textwrap.dedent(f"""
        import argparse, os, sys
        from mstar_ray import cli
        os.mkdir({str(gone)!r}); os.chdir({str(gone)!r}); os.rmdir({str(gone)!r})

        def broken(args):
            exec(compile("raise RuntimeError('the component broke')", "mstar_ray/search_loop/policy.py", "exec"))

        sys.exit(cli._handled(argparse.Namespace(handler=broken, command="run", run_dir="run", debug=False)))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    err = done.stderr.splitlines()
    assert done.returncode == 3, done.stderr
    assert err[0] == "internal error in mstar_ray.search_loop.policy (<module>, line 1): RuntimeError: the component broke"
    assert err[1].startswith("the working directory no longer exists")
    log = Path(err[2].removeprefix("the full traceback is in ").split(" (--debug")[0])
    assert "Traceback" not in done.stderr and "RuntimeError: the component broke" in log.read_text()
    log.unlink()


@pytest.mark.parametrize("address", ["127.0.0.1:9", "ray://127.0.0.1:9"])
def test_a_ray_address_nothing_answers_on_is_named_at_once(tmp_path, capsys, address):
    """Ray retries a dead GCS address for many minutes (its client 30 s, naming nothing); the run says at once."""
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"task": {"name": "synthetic", "sessions": 4, "personas": 2,
                                                "questions_per_category": 2},
                                       "search": {"max_candidates": 1}, "llm": {"embedding": {"kind": "hashing"}}}))
    assert main(["run", str(config), "--run-dir", str(tmp_path / "run"), "--address", address]) == 3
    err = capsys.readouterr().err
    assert f"no Ray at {address} (--address or ray.address)" in err and "ray start --head" in err
