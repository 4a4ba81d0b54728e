"""``status``, ``export`` and ``report`` on a real finished run, and on a run whose driver is live or gone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mstar_ray.cli import main
from mstar_ray.inspect.status import driver_alive, status_text
from mstar_ray.runlog.writer import LogWriter
from scripts.fault_resume import config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("inspect")
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(config(6)))
    run_dir = tmp / "run"
    done = subprocess.run([sys.executable, "-m", "mstar_ray.cli", "run", str(path), "--run-dir", str(run_dir)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir


def test_status_of_a_finished_run(finished_run, capsys):
    assert main(["status", str(finished_run)]) == 0
    text = capsys.readouterr().out
    assert "(finished)" in text and "6/6 candidates evaluated" in text
    assert re.search(r"best\s+0\.\d{3} \[0\.\d{3}, [01]\.\d{3}\] [0-9a-f]{16}", text) and "test      best" in text
    assert "holding 100% of the static questions' evidence" in text
    assert re.search(r"chosen by (best seed|paired bootstrap|confirmation): ", text)
    assert re.search(r"failures  best: \d+ \w+", text)  # its failures attributed to a stage


def test_export_writes_the_best_program(finished_run, tmp_path, capsys):
    out = tmp_path / "best.py"
    assert main(["export", str(finished_run), "--best", str(out)]) == 0
    assert out.read_text() == (finished_run / "best.py").read_text()


def test_report_is_one_self_contained_html_file(finished_run, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", str(finished_run), "--out", str(out)]) == 0
    page = out.read_text()
    assert page.count("data:image/png;base64,") == 7 and "diff from its seed" in page
    assert "Where the failures went wrong: storage, retrieval or answering" in page
    assert "src=\"http" not in page and "<script" not in page
    assert "Structural families" in page and "<th>medoid</th>" in page
    # the Pareto front: its members with their per-category static means and weights
    assert "Pareto front" in page and "programs on the front over every static question" in page
    assert "<th>best on</th>" in page


def test_the_run_stores_its_structural_families_and_the_report_recomputes_them_without(finished_run, tmp_path):
    import json
    import shutil

    from mstar_ray.inspect.report import _families
    from mstar_ray.runlog.reader import read_rows
    from mstar_ray.structure.families import Families

    stored = Families.model_validate_json((finished_run / "structure.json").read_text())
    evaluated = [r.id for r in read_rows(finished_run, "candidates") if r.status == "evaluated"]
    assert sorted(stored.ids) == sorted(evaluated) and len(stored.labels) == len(stored.coords) == len(evaluated)
    assert set(stored.medoids) <= set(stored.ids) and 0 < stored.mean_distance <= 1
    summary = json.loads((finished_run / "summary.json").read_text())
    assert summary["structural_families"] == len(stored.medoids)
    copy = tmp_path / "copy"
    shutil.copytree(finished_run, copy)
    (copy / "structure.json").unlink()
    from mstar_ray.state.replay import restore

    recomputed = _families(copy, restore(copy).members)
    assert recomputed.ids == stored.ids and recomputed.labels == stored.labels
    assert max(abs(a - b) for p, q in zip(recomputed.coords, stored.coords) for a, b in zip(p, q)) < 1e-9


def test_a_live_driver_is_seen_through_its_log_lock(finished_run):
    assert not driver_alive(finished_run)
    with LogWriter(finished_run, "events"):
        assert driver_alive(finished_run)
        assert "(running)" in status_text(finished_run)


def test_a_run_without_a_summary_is_interrupted(finished_run, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(finished_run, copy)
    (copy / "summary.json").unlink()
    assert "interrupted (resume with --resume)" in status_text(copy)


def test_status_of_something_that_is_not_a_run(tmp_path, capsys):
    assert main(["status", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_status_prints_a_hostile_commit_message_with_its_controls_spelled_out(finished_run, tmp_path, capsys):
    """A reflector's commit message is model output: the log holds it as written, ``status`` shows it inert."""
    import shutil

    from mstar_ray.runlog import layout
    from mstar_ray.runlog.reader import read_rows

    copy = tmp_path / "hostile"
    shutil.copytree(finished_run, copy)
    payload = "\x1b]0;pwned\x07\x1b[2K\rfinal program 0123456789abcdef 1.000\x9b31m\u202e\x1b]52;c;cG93bmVk\x07"
    rows = [row.model_copy(update={"commit_message": payload}) for row in read_rows(copy, "candidates")]
    layout.log_path(copy, "candidates").unlink()
    with LogWriter(copy, "candidates") as writer:
        writer.append(rows)
    assert main(["status", str(copy)]) == 0
    text = capsys.readouterr().out
    assert "\\x1b]0;pwned\\x07" in text
    assert not any(c in text for c in "\x1b\x07\r\x9b\u202e")
