"""The HealthBench and PRBench loaders on fixtures of our own in each benchmark's published layout (neither
benchmark is ever copied here): training texts and evaluation items, the seeded draw between them, categories,
PRBench's weights and turns, Parquet and JSONL alike, and clear errors naming the file, the line and the field."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mstar_ray.cli import main
from mstar_ray.families.task_registry import load_task, task_options
from mstar_ray.families.rubric.conversations import REFERENCE_HEADER, RUBRIC_HEADER, RubricSpec

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "rubric"
HEALTHBENCH = FIXTURES / "healthbench.jsonl"
PRBENCH = FIXTURES / "prbench.jsonl"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_rows(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_healthbench_conversations_become_training_texts_and_items():
    task = load_task("healthbench", data=str(HEALTHBENCH))
    assert task.name == "healthbench/healthbench" and task.family == "rubric"
    records = {r["prompt_id"]: r for r in rows(HEALTHBENCH)}
    trained = {t.id.removeprefix("train/") for t in task.texts}
    evaluated = {i.id for i in task.items}
    assert not trained & evaluated and trained | evaluated == set(records)
    assert all(records[i]["ideal_completions_data"] for i in trained)  # only records with an ideal completion train
    # per theme: 9 of its 12 records have an ideal completion; round(0.5 x 9) = 4 train, 8 are evaluated
    assert Counter(i.category for i in task.items) == {"emergency_referrals": 8, "health_data_tasks": 8,
                                                       "context_seeking": 8}
    text = task.texts[0]
    record = records[text.id.removeprefix("train/")]
    assert text.text.startswith("Conversation:\n" + record["prompt"][0]["content"])
    assert text.text.endswith(f"{REFERENCE_HEADER}\n{record['ideal_completions_data']['ideal_completion']}")
    multi = next(i for i in task.items if i.id == "hb-chest-4")
    assert multi.question.splitlines()[0] == "User: My husband has chest pain." and multi.question.startswith("User:")
    assert multi.question.endswith("he looks pale and sweaty.")
    assert multi.answer.startswith("A good response:\n- Tells the user to call emergency services")  # no ideal given
    spec = RubricSpec.model_validate(multi.spec)
    assert [m.role for m in spec.messages] == ["user", "assistant", "user"]
    assert [c.points for c in spec.criteria] == [8, 5, 4, 3, -6]
    assert spec.criteria[0].tags == ["level:example", "axis:accuracy"]
    single = next(i for i in task.items if i.id == "hb-ibuprofen-1")
    assert single.question == "How much ibuprofen can I give?"  # a lone user message is itself


def test_the_draw_of_training_texts_is_seeded_per_category_and_a_limit_leaves_it_alone():
    def trained(**options) -> set[str]:
        return {t.id for t in load_task("healthbench", data=str(HEALTHBENCH), **options).texts}

    assert trained(seed=3) == trained(seed=3)
    assert len({frozenset(trained(seed=s)) for s in range(4)}) > 1
    assert len(trained(train_share=0.25)) == 3 * round(0.25 * 9)
    assert trained(limit=3) == trained()
    limited = load_task("healthbench", data=str(HEALTHBENCH), limit=3)
    assert len(limited.items) == 3 and len({i.category for i in limited.items}) == 3
    # a theme kept alone draws as it did among the others
    alone = load_task("healthbench", data=str(HEALTHBENCH), only_categories=("context_seeking",))
    assert {i.category for i in alone.items} == {"context_seeking"}
    assert {t.id for t in alone.texts} == {t for t in trained() if t.split("-")[1] in ("ibuprofen", "rash", "headache")}


def test_prbench_rows_become_conversations_with_weighted_criteria():
    task = load_task("prbench", data=str(PRBENCH))
    assert task.name == "prbench/prbench" and task.family == "rubric"
    assert Counter(i.category for i in task.items) == {"legal": 3, "finance": 3}
    assert len(task.texts) == 6  # PRBench gives no reference responses: every row may train, half do
    items = {i.id: i for i in load_task("prbench", data=str(PRBENCH), train_share=0.01).items}  # none trains
    deposit = RubricSpec.model_validate(items["pr-deposit-3"].spec)
    assert [m.role for m in deposit.messages] == ["user", "assistant", "user"]
    assert deposit.messages[2].content.startswith("Reference text 0:\nThe client is a tenant")
    assert deposit.messages[2].content.endswith("How should I advise the client?")
    # points: the field its weight_class names (a stale sibling weight is ignored), signed by the class
    assert [c.points for c in deposit.criteria] == [9, 6, 5, 3, -6]
    assert deposit.criteria[0].text.startswith("States that the landlord must return")  # the title
    assert deposit.criteria[1].tags == ["category:Application of Law to the Facts"]
    text = next(t for t in load_task("prbench", data=str(PRBENCH)).texts)
    assert f"\n{RUBRIC_HEADER}\nA good response:\n- " in text.text and "\nIt must not:\n- " in text.text


def test_a_stored_positive_weight_of_a_detrimental_class_still_subtracts(tmp_path):
    records = rows(PRBENCH)
    notes = records[0]["rubric"][4]["annotations"]
    notes["detrimental_weight"] = 6
    task = load_task("prbench", data=str(write_rows(tmp_path / "p.jsonl", records)), train_share=0.01)
    spec = RubricSpec.model_validate(next(i for i in task.items if i.id == records[0]["task"]).spec)
    assert spec.criteria[4].points == -6


def parquet(records: list[dict], path: Path) -> Path:
    """The rows as the release stores them: every column in every row (a turn a task lacks is null)."""
    columns = sorted(set().union(*records))
    pq.write_table(pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in records]), path)
    return path


def test_prbench_parquet_reads_as_its_jsonl(tmp_path):
    parquet(rows(PRBENCH), tmp_path / "prbench.parquet")
    from_parquet = load_task("prbench", data=str(tmp_path / "prbench.parquet"))
    from_jsonl = load_task("prbench", data=str(PRBENCH))
    assert from_parquet.texts == from_jsonl.texts and from_parquet.items == from_jsonl.items


def test_the_data_is_required_and_found():
    with pytest.raises(ValueError, match="healthbench needs data"):
        task_options(name="healthbench")
    with pytest.raises(FileNotFoundError, match="HealthBench is not shipped"):
        load_task("healthbench", data="/nowhere/hb.jsonl")
    with pytest.raises(FileNotFoundError, match="PRBench is not shipped"):
        load_task("prbench", data="/nowhere/pr.parquet")
    with pytest.raises(ValueError, match="no item of category nope; the file's categories are context_seeking, "
                                         "emergency_referrals, health_data_tasks"):
        load_task("healthbench", data=str(HEALTHBENCH), only_categories=("nope",))


def _hb_no_positive(r):
    for c in r["rubrics"]:
        c["points"] = -abs(c["points"])


def _hb_last_assistant(r):
    r["prompt"].append({"role": "assistant", "content": "Here is what to do."})


HEALTHBENCH_ERRORS = {
    "no positive points": (_hb_no_positive, "line 2: field 'rubrics': no criterion has positive points "
                           "(-8, -5, -4, -3, -6); the score is the points met over the total of the positive "
                           "points, so this rubric cannot score a response"),
    "missing id": (lambda r: r.pop("prompt_id"), "line 2: field 'prompt_id': Field required"),
    "points not a number": (lambda r: r["rubrics"][1].update(points="five"),
                            "line 2: field 'rubrics.1.points': Input should be a valid number"),
    "empty criterion": (lambda r: r["rubrics"][0].update(criterion=""), "line 2: field 'rubrics.0.criterion'"),
    "unknown role": (lambda r: r["prompt"][0].update(role="doctor"), "line 2: field 'prompt.0.role'"),
    "ends with the assistant": (_hb_last_assistant, "line 2: field 'prompt': the conversation's last message is the "
                                "assistant's; it must end with the user message to respond to"),
    "no theme": (lambda r: r.update(example_tags=["physician_agreed_category:x"]),
                 "line 2: field 'example_tags': no 'theme:...' tag; the theme is the item's category"),
    "ideal without text": (lambda r: r.update(ideal_completions_data={"ideal_completions_group": "g"}),
                           "line 2: field 'ideal_completions_data.ideal_completion': Field required"),
    "empty rubric": (lambda r: r.update(rubrics=[]), "line 2: field 'rubrics': the rubric has no criteria"),
}


@pytest.mark.parametrize("case", list(HEALTHBENCH_ERRORS))
def test_a_bad_healthbench_record_is_refused_naming_file_line_and_field(tmp_path, case):
    change, message = HEALTHBENCH_ERRORS[case]
    records = rows(HEALTHBENCH)[:3]
    change(records[1])
    path = write_rows(tmp_path / "hb.jsonl", records)
    with pytest.raises(ValueError) as err:
        load_task("healthbench", data=str(path))
    assert str(err.value).startswith(f"{path}: {message}")


def test_a_malformed_line_and_a_repeated_id_are_refused(tmp_path):
    path = tmp_path / "hb.jsonl"
    lines = HEALTHBENCH.read_text().splitlines()
    path.write_text("\n".join([lines[0], "", lines[1][:-20], lines[2]]) + "\n")
    with pytest.raises(ValueError, match=r"hb.jsonl: line 3: not valid JSON \(Unterminated string starting at column \d+\)"):
        load_task("healthbench", data=str(path))
    path.write_text("\n".join([lines[0], "[1, 2]"]))
    with pytest.raises(ValueError, match="line 2: expected a JSON object, found list"):
        load_task("healthbench", data=str(path))
    path.write_text("\n".join([lines[0], lines[1], lines[0]]))
    with pytest.raises(ValueError, match="records 1 and 3 have the same id 'hb-chest-1'"):
        load_task("healthbench", data=str(path))


def _pr_weight(field, value):
    def change(r):
        r["rubric"][2]["annotations"][field] = value
    return change


def _pr_no_positive(r):
    r["rubric"] = [c for c in r["rubric"] if "detrimental" in c["annotations"]["weight_class"]]


def _pr_last_response(r):
    r["response_0"] = "An answer."


PRBENCH_ERRORS = {
    "no positive points": (_pr_no_positive, "line 2: field 'rubric': no criterion has positive points (-6)"),
    "unknown weight class": (_pr_weight("weight_class", "vital"), "line 2: field 'rubric.2.annotations.weight_class': "
                             "'vital' is not one of critically important, important, slightly important, slightly "
                             "detrimental, detrimental, critically detrimental"),
    "missing weight": (_pr_weight("important_weight", None), "line 2: field 'rubric.2.annotations.important_weight': "
                       "the weight of a 'important' criterion must be a non-zero number, found None"),
    "missing field": (lambda r: r.pop("field"), "line 2: field 'field': Field required"),
    "ends with a response": (_pr_last_response, "line 2: field 'prompt_0': the conversation's last message is the "
                             "assistant's"),
    "references not a list": (lambda r: r.update(reference_texts_0="a text"),
                              "line 2: field 'reference_texts_0': expected a list of strings"),
}


@pytest.mark.parametrize("case", list(PRBENCH_ERRORS))
def test_a_bad_prbench_row_is_refused_naming_file_line_and_field(tmp_path, case):
    change, message = PRBENCH_ERRORS[case]
    records = rows(PRBENCH)[:3]
    change(records[1])
    path = write_rows(tmp_path / "pr.jsonl", records)
    with pytest.raises(ValueError) as err:
        load_task("prbench", data=str(path))
    assert str(err.value).startswith(f"{path}: {message}")


def test_a_bad_parquet_row_is_named_by_its_row(tmp_path):
    records = rows(PRBENCH)
    records[4]["rubric"][0]["annotations"]["critically_important_weight"] = 0
    parquet(records, tmp_path / "pr.parquet")
    with pytest.raises(ValueError, match=r"pr.parquet: row 5: field 'rubric.0.annotations.critically_important_weight'"):
        load_task("prbench", data=str(tmp_path / "pr.parquet"))
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match="junk.parquet is not a readable Parquet file"):
        load_task("prbench", data=str(tmp_path / "junk.parquet"))


def test_eval_refuses_bad_data_with_exit_2_before_starting_anything(tmp_path, capsys):
    records = rows(HEALTHBENCH)[:2]
    _hb_no_positive(records[1])
    path = write_rows(tmp_path / "hb.jsonl", records)
    assert main(["eval", str(ROOT / "seeds" / "vector_search.py"), "--task", "healthbench", "--data", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: line 2: field 'rubrics': no criterion has positive points")
    assert "writing texts" not in err


def test_eval_on_the_healthbench_fixture_from_the_command_line():
    done = subprocess.run(
        [sys.executable, "-m", "mstar_ray.cli", "eval", "seeds/vector_search.py", "--task", "healthbench",
         "--data", "tests/fixtures/rubric/healthbench.jsonl", "--embedder", "hashing"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "family rubric, scored by rubric score" in out and "OFFLINE STAND-IN GRADER" in out
    for theme in ("context_seeking", "emergency_referrals", "health_data_tasks"):
        assert f"\n{theme} " in out
    assert "respond 24" in out and "grade unreadable 0" in out
