"""A user's own task from outside the package (``task: {adapter: FILE.py:NAME}``): the shipped example runs a
search on a real local Ray from a folder outside the checkout, its family made on the workers from the source
each job carries; a bad adapter is refused before anything starts, naming the file and what is wrong."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml

from mstar_ray.cli import main
from mstar_ray.families.base import Family
from mstar_ray.tasks.adapter import FAMILY_MEMBERS, AdapterTask
from mstar_ray.families.task_registry import task_from_config
from scripts.fault_resume import table

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "custom_task"


def test_the_adapter_checks_every_member_of_the_family_protocol():
    members = {n for n in vars(Family) if not n.startswith("_")} | set(typing.get_type_hints(Family))
    assert set(FAMILY_MEMBERS) == members


def test_the_example_searches_on_ray_from_a_folder_outside_the_checkout(tmp_path):
    folder = tmp_path / "my_project"
    shutil.copytree(EXAMPLE, folder)
    elsewhere = tmp_path / "elsewhere"  # the working directory: neither the checkout nor the adapter's folder
    elsewhere.mkdir()
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": ""}
    run_dir = tmp_path / "run"
    driver = subprocess.Popen([sys.executable, "-m", "mstar_ray.cli", "run", str(folder / "run.yaml"), "--run-dir",
                               str(run_dir)], cwd=elsewhere, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    _, err = driver.communicate(timeout=900)
    assert driver.returncode == 0, err[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["metric"] == "answer contained"  # the user's family, named by the driver
    assert summary["texts"]["total"] == 40 and set(summary["best"]["test_categories"]) == {
        "city", "pet", "instrument", "project"}
    candidates = table(run_dir, "candidates")
    # every evaluation ran in a Ray worker, not in the driver, and scored with the user's family there
    assert candidates and all(c["metric"] == "answer contained" for c in candidates)
    assert all(isinstance(c["worker_pid"], int) and c["worker_pid"] != driver.pid for c in candidates)
    results = table(run_dir, "results")
    assert results and {r["trace"] for r in results} <= {"expected words all in the answer",
                                                         "expected words not all in the answer"}
    stored = yaml.safe_load((run_dir / "config.yaml").read_text())["task"]
    assert stored == {"adapter": f"{(folder / 'team_notes.py').resolve()}:TeamNotes", "people": 10}


def _write(folder: Path, source: str, task: dict) -> str:
    (folder / "tasks.py").write_text(source)
    config = {"task": task, "search": {"seeds": ["vector_search"], "max_candidates": 1},
              "llm": {"embedding": {"kind": "hashing"}}, "ray": {"num_cpus": 1}}
    (folder / "run.yaml").write_text(yaml.safe_dump(config))
    return str(folder / "run.yaml")


GOOD = EXAMPLE.joinpath("team_notes.py").read_text()


@pytest.mark.parametrize("source, task, expected", [
    (GOOD, {"adapter": "missing.py:TeamNotes"}, "file not found: missing.py"),
    (GOOD, {"adapter": "tasks.py"}, "must be FILE.py:NAME or MODULE:NAME"),
    (GOOD, {"adapter": "tasks.py:TeamNote"}, "tasks.py has no 'TeamNote' (it defines"),
    (GOOD, {"adapter": "tasks.py:TeamNotes", "peple": 3}, "task.peple: unknown key; did you mean 'people'?"),
    (GOOD, {"adapter": "tasks.py:TeamNotes", "people": 1}, "task.people: Input should be greater than or equal to 2"),
    ("import no_such_module\n", {"adapter": "tasks.py:X"}, "importing"),
    ("class X:\n    family = 'qa'\n", {"adapter": "tasks.py:X"}, "tasks.py:X lacks texts, items"),
    ("class X:\n    family = 'qa'\n    def texts(self, o): return []\n    def items(self, o): return []\n",
     {"adapter": "tasks.py:X", "size": 3}, "task.size: unknown key; "),
    ("class F:\n    name = 'f'\n\nclass X:\n    family = F\n    def texts(self, o): return []\n"
     "    def items(self, o): return []\n", {"adapter": "tasks.py:X"}, "family F is not a Family: it lacks brief"),
    ("class X:\n    family = 'qa'\n    def texts(self, o): return []\n"
     "    def items(self, o): return [{'id': 'a', 'question': 'q'}]\n", {"adapter": "tasks.py:X"},
     "X.items(options)[0] is not a valid Item: answer: Field required"),
    ("class X:\n    family = 'qa'\n    def texts(self, o): return []\n    def items(self, o): return []\n",
     {"adapter": "tasks.py:X"}, "X.items(options) returned no items"),
    ("class X:\n    family = 'qa'\n    def texts(self, o): raise OSError('no notes here')\n"
     "    def items(self, o): return []\n", {"adapter": "tasks.py:X"}, "X.texts(options) failed: OSError: no notes here"),
])
def test_a_bad_adapter_is_refused_with_exit_2_naming_the_file(tmp_path, capsys, source, task, expected):
    assert main(["run", _write(tmp_path, source, task), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert not (tmp_path / "run").exists()  # refused before anything started


def test_a_family_named_as_one_of_the_packages_is_refused(tmp_path, capsys):
    source = GOOD.replace('name = "contains-answer"', 'name = "qa"')
    assert main(["run", _write(tmp_path, source, {"adapter": "tasks.py:TeamNotes"}), "--run-dir",
                 str(tmp_path / "run")]) == 2
    assert "its family is called 'qa', as one of the package's" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_an_adapter_from_an_importable_module_uses_a_family_by_name(tmp_path, monkeypatch):
    (tmp_path / "user_pkg").mkdir()
    (tmp_path / "user_pkg" / "__init__.py").write_text("")
    (tmp_path / "user_pkg" / "facts.py").write_text(
        "from mstar_ray.tasks.model import RawText\n"
        "class Facts:\n    family = 'qa'\n"
        "    def texts(self, options): return [RawText(id='t', text='The sky is green here.')]\n"
        "    def items(self, options):\n"
        "        return [{'id': 'q', 'question': 'What colour is the sky?', 'answer': 'green', 'category': 'c',"
        " 'evidence': ['t']}]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    task = task_from_config(AdapterTask(adapter="user_pkg.facts:Facts"))
    assert (task.name, task.family, [t.id for t in task.texts], task.evidence_holders()) == ("Facts", "qa", ["t"], {"t": "t"})
