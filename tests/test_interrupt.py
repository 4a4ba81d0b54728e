"""Ctrl-C (SIGINT) and SIGTERM (what `ray job stop` sends) stop a real `mstar-ray run` cleanly: exit 130 and
143, one line saying how to resume, a `stopped` event in the run's log; the resumed run then finishes with
nothing lost and nothing evaluated twice."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import yaml

from scripts.fault_resume import CLI, ROOT, _rows_now, check, config, table


CHILDREN = 24


def _searched(run_dir: Path) -> int:
    return sum(r["status"] != "duplicate" for r in table(run_dir, "candidates"))


def _with_sigint_blocked() -> None:
    """In the child, before exec: SIGINT blocked (at its default disposition), as a process manager or a Ray
    worker may start a command. A blocked signal stays pending across exec; the CLI must unblock it, or the
    run never sees Ctrl-C at all (this test's own worker hands its children SIGINT blocked)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _stop_after_rows(command: list[str], run_dir: Path, rows: int,
                     sig: signal.Signals) -> tuple[subprocess.CompletedProcess, int]:
    """Runs ``command`` until the candidates log has ``rows`` rows, then sends ``sig``; returns how it ended
    and how many programs had been evaluated when the signal was sent."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               preexec_fn=_with_sigint_blocked)
    deadline = time.monotonic() + 240
    while process.poll() is None and _rows_now(run_dir) < rows and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process.poll() is None, f"the run ended by itself before the signal:\n{process.stderr.read()[-3000:]}"
    evaluated = _searched(run_dir)
    process.send_signal(sig)
    out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(command, process.returncode, out, err), evaluated


def test_ctrl_c_and_sigterm_stop_a_run_that_then_resumes(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config(CHILDREN)))
    run_dir = tmp_path / "run"
    resume_line = f"resume with  mstar-ray run --resume {run_dir}"

    first, evaluated = _stop_after_rows([*CLI, str(path), "--run-dir", str(run_dir)], run_dir, 2, signal.SIGINT)
    assert first.returncode == 130, f"SIGINT sent with {evaluated} programs evaluated:\n{first.stderr[-3000:]}"
    assert "stopped by Ctrl-C" in first.stderr and resume_line in first.stderr
    assert "Traceback" not in first.stderr
    after_first = _rows_now(run_dir)

    second, evaluated = _stop_after_rows([*CLI, "--resume", str(run_dir)], run_dir, after_first + 1, signal.SIGTERM)
    assert second.returncode == 143, f"SIGTERM sent with {evaluated} programs evaluated:\n{second.stderr[-3000:]}"
    assert "stopped by SIGTERM" in second.stderr and resume_line in second.stderr
    assert "Traceback" not in second.stderr

    stops = [e["detail"] for e in table(run_dir, "events") if e["kind"] == "stopped"]
    assert stops == ["interrupted by Ctrl-C", "interrupted by SIGTERM"]

    done = subprocess.run([*CLI, "--resume", str(run_dir)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert check(run_dir) == []  # nothing queued was lost, nothing evaluated twice
    rows = [r for r in table(run_dir, "candidates") if r["status"] != "duplicate"]
    assert sum(r["origin"] != "seed" for r in rows) == CHILDREN
