"""The jsonl task (a user's own data): the fixture's records, the errors that name the line and the field,
LoCoMo written as jsonl loading back to the same task, and the command line and config entry points."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mstar_ray.exit_codes import EXIT_INPUT
from mstar_ray.run_config import RunConfig
from mstar_ray.families.qa.jsonl import load_jsonl
from mstar_ray.families.task_registry import load_task
from scripts.task_to_jsonl import write_jsonl_task

FIXTURE = Path(__file__).parent / "fixtures" / "jsonl_task"
ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.json"


def test_the_fixture_loads_with_its_units_evidence_and_test_split():
    task = load_task("jsonl", data=str(FIXTURE))
    assert task.name == "jsonl/jsonl_task" and task.family == "qa"
    assert [t.id for t in task.texts] == ["t1", "t2", "t3", "t4"]  # the blank line is skipped
    assert [q.id for q in task.items] == ["q1", "q2", "q3", "q4", "q5"]
    assert task.test_ids == ["q4"]
    evidence = task.evidence()
    assert evidence["t1:bo"].text == "Bo: Nice, I still live in Oslo." and evidence["t1:bo"].text_id == "t1"
    assert evidence["t3"].text_id == "t3"  # a text without units is cited by its own id
    assert task.evidence_holders()["t1:ann"] == "t1"


def test_training_questions_are_failure_cases_never_the_fitness(tmp_path):
    folder = tmp_path / "marked"
    shutil.copytree(FIXTURE, folder)
    lines = (folder / "questions.jsonl").read_text().splitlines()
    marked = [json.loads(line) for line in lines]
    for record in marked[:2]:
        record["split"] = "train"
    (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in marked))
    task = load_jsonl(folder)
    assert task.train_ids == ["q1", "q2"] and task.test_ids == ["q4"]
    from mstar_ray.embedding.hashing import HashingEmbedder
    from mstar_ray.search.split import SplitPlan

    plan = SplitPlan(task, HashingEmbedder(), test_fraction=0.3, static_size=5, rotating_size=2, train_ratio=2.0,
                     seed=0, confirmation_size=1)
    assert plan.split.test == ["q4"] and not {"q1", "q2"} & set(plan.split.static + plan.split.confirmation)
    assert set(plan.split.static) == {"q3", "q5"} and {"q1", "q2"} <= set(plan.split.validation)
    assert set(plan.rotating(1)) <= {"q1", "q2"}  # what is left for failure cases: the training questions


def test_limit_keeps_the_test_marks_of_the_questions_kept():
    task = load_jsonl(FIXTURE, limit=2)
    assert len(task.items) == 2 and set(task.test_ids) <= {q.id for q in task.items}


def _broken(tmp_path: Path, file: str, line: int, replacement: str) -> Path:
    folder = tmp_path / "data"
    shutil.copytree(FIXTURE, folder)
    path = folder / file
    lines = path.read_text().splitlines()
    lines[line - 1] = replacement
    path.write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.parametrize("file, line, replacement, message", [
    ("questions.jsonl", 2, '{"id": "q2", "question": "What?", "answer": "Pixel"', r"questions\.jsonl line 2: not JSON"),
    ("questions.jsonl", 3, '{"id": "q3", "question": "Where?", "answer": "Porto"}', r"line 3: field category: Field required"),
    ("questions.jsonl", 1, '{"id": "q1", "question": "Where?", "answer": 2022, "category": "c"}', r"line 1: field answer: Input should be a valid string"),
    ("questions.jsonl", 1, '{"id": "q1", "question": " ", "answer": "x", "category": "c"}', r"line 1: field question: .*must not be empty"),
    ("questions.jsonl", 5, '{"id": "q1", "question": "Again?", "answer": "x", "category": "c"}', r"line 5: field id: 'q1' is already the id of line 1"),
    ("questions.jsonl", 1, '{"id": "q1", "question": "Where?", "answer": "Oslo", "category": "c", "evidence": ["t9"]}', r"line 1: field evidence\.0: 't9' is no text or unit id"),
    ("questions.jsonl", 1, '{"id": "q1", "question": "Where?", "answer": "Oslo", "category": "c", "split": "dev"}', r"line 1: field split: Input should be 'test' or 'train'"),
    ("questions.jsonl", 1, '{"id": "q1", "question": "Where?", "answer": "Oslo", "category": "c", "answr": "x"}', r"line 1: field answr: Extra inputs are not permitted"),
    ("questions.jsonl", 1, '["q1", "Where?"]', r"line 1: expected a JSON object, found list"),
    ("texts.jsonl", 2, '{"id": "t2", "text": "short", "units": [{"id": "u", "start": 2, "end": 40}]}', r"texts\.jsonl line 2: field units\.0: spans 2\.\.40, outside the text's 5 characters"),
    ("texts.jsonl", 3, '{"id": "t3"}', r"texts\.jsonl line 3: field text: Field required"),
])
def test_a_bad_record_names_its_file_line_and_field(tmp_path, file, line, replacement, message):
    with pytest.raises(ValueError, match=message):
        load_jsonl(_broken(tmp_path, file, line, replacement))


def test_missing_files_and_folders_say_what_a_jsonl_task_holds(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a directory"):
        load_jsonl(tmp_path / "absent")
    (tmp_path / "texts.jsonl").write_text('{"id": "t", "text": "x"}\n')
    with pytest.raises(FileNotFoundError, match="questions.jsonl: not found"):
        load_jsonl(tmp_path)
    (tmp_path / "questions.jsonl").write_text("\n\n")
    with pytest.raises(ValueError, match="questions.jsonl: no records"):
        load_jsonl(tmp_path)


@pytest.mark.skipif(not LOCOMO.is_file(), reason="needs ../shared/data/locomo10.json")
@pytest.mark.parametrize("conversation", [0, 5])
def test_locomo_written_as_jsonl_loads_back_to_the_same_texts_and_questions(tmp_path, conversation):
    locomo = load_task("locomo", conversation=conversation, data=str(LOCOMO))
    write_jsonl_task(locomo, tmp_path / "conv")
    again = load_task("jsonl", data=str(tmp_path / "conv"))
    assert again.texts == locomo.texts and again.items == locomo.items and again.test_ids == []
    assert again.evidence() == locomo.evidence()


def test_the_command_line_evaluates_a_jsonl_task_and_refuses_a_bad_line(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "mstar_ray.cli", "eval", str(ROOT / "seeds" / "vector_search.py"),
                         "--task", "jsonl", "--data", str(FIXTURE), "--embedder", "hashing", "--json"],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["task"] == "jsonl/jsonl_task" and len(report["results"]) == 5
    assert next(r for r in report["results"] if r["id"] == "q2")["score"] > 0  # its text was written and read back
    bad = _broken(tmp_path, "questions.jsonl", 4, '{"id": "q4"}')
    refused = subprocess.run([sys.executable, "-m", "mstar_ray.cli", "eval", str(ROOT / "seeds" / "vector_search.py"),
                              "--task", "jsonl", "--data", str(bad)], capture_output=True, text=True, timeout=120)
    assert refused.returncode == EXIT_INPUT
    assert "questions.jsonl line 4: field question: Field required" in refused.stderr


def test_the_config_names_the_task_and_needs_its_data():
    config = RunConfig.model_validate({"task": {"name": "jsonl", "data": str(FIXTURE)}})
    assert config.task.name == "jsonl"
    with pytest.raises(ValueError, match="task jsonl needs data: the directory holding your texts.jsonl"):
        RunConfig.model_validate({"task": {"name": "jsonl"}})
