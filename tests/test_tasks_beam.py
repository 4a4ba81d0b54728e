"""The BEAM loader on a fixture of our own in BEAM's published layout (BEAM itself is never copied here):
texts, questions, the ten abilities, evidence, the ways of pointing at the data, and clear errors naming the
file, the record and the field."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mstar_ray.families.qa.beam import ABILITIES, load_beam
from mstar_ray.families.task_registry import load_task, task_options
from tests.conftest import SEEDS

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "beam"


@pytest.fixture
def data(tmp_path) -> Path:
    """A writable copy of the fixture, to break."""
    copy = tmp_path / "beam"
    shutil.copytree(FIXTURE, copy)
    return copy


def conversation_file(data: Path, name: str) -> Path:
    return data / "100K" / "1" / name


def edit_json(path: Path, change) -> None:
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value))


def test_a_conversation_becomes_texts_and_questions_in_the_ten_abilities():
    task = load_task("beam", data=str(FIXTURE))
    assert task.name == "beam/100K/1"
    assert [t.id for t in task.texts] == [f"m{i}" for i in range(10)]
    first, fourth = task.texts[0].text, task.texts[4].text
    assert first.startswith("[March-02-2024] user: I'm Priya") and "->->" not in first
    assert task.texts[3].text.startswith("[March-02-2024] assistant: ")  # the anchor carries forward
    assert fourth.startswith("[April-10-2024] user: Update:")  # a batch's own anchor
    assert {q.category for q in task.items} == {a.replace("_", "-") for a in ABILITIES}
    by_id = {q.id: q for q in task.items}
    assert by_id["1/information_extraction/0"].answer == "Cherokee Purple"
    assert by_id["1/information_extraction/0"].evidence == ["m0"]
    assert by_id["1/knowledge_update/0"].evidence == ["m2", "m4"]  # from {original_info, updated_info}
    assert by_id["1/abstention/0"].answer.startswith("Based on the provided chat")  # ideal_response
    assert by_id["1/summarization/0"].answer.startswith("You planned")  # ideal_summary
    assert by_id["1/instruction_following/0"].answer == "Response is a short bullet list."  # expected_compliance


@pytest.mark.parametrize("where", ["root", "chats", "size", "conversation"])
def test_the_data_may_name_the_root_a_chats_folder_a_size_or_a_conversation(tmp_path, where):
    layouts = {
        "root": (tmp_path / "root", "root"),
        "chats": (tmp_path / "repo" / "chats", "repo"),
        "size": (tmp_path / "root", "root/100K"),
        "conversation": (tmp_path / "root", "root/100K/1"),
    }
    copy_to, given = layouts[where]
    shutil.copytree(FIXTURE, copy_to)
    assert load_beam(tmp_path / given).name == "beam/100K/1"


def test_conversations_are_numbered_in_id_order_and_limits_spread_over_abilities():
    assert load_beam(FIXTURE, conversation=1).name == "beam/100K/2"
    limited = load_beam(FIXTURE, limit=4)
    assert len(limited.items) == 4 and len({q.category for q in limited.items}) == 4


def test_where_the_data_is_not(tmp_path):
    with pytest.raises(FileNotFoundError, match="not shipped"):
        load_beam(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="no BEAM conversation of size 500K"):
        load_beam(FIXTURE, size="500K")
    with pytest.raises(ValueError, match=r"out of range.*holds 2 conversations \(valid indices 0\.\.1; ids 1, 2\)"):
        load_beam(FIXTURE, conversation=2)
    with pytest.raises(ValueError, match="task beam needs data"):
        load_task("beam")
    with pytest.raises(ValueError, match="task beam needs data"):
        task_options(name="beam")


def test_malformed_chats_are_named_by_file_batch_turn_message_and_field(data):
    chat = conversation_file(data, "chat.json")
    edit_json(chat, lambda batches: batches[1]["turns"][1][0].pop("content"))
    with pytest.raises(ValueError) as caught:
        load_beam(data)
    assert str(caught.value) == f"{chat}: batch 1 turn 1 message 0: field 'content': Field required"
    chat.write_text('[{"batch_number": 1, "turns": [[{"role": "user",}]]}]')
    with pytest.raises(ValueError, match=rf"{chat} is not valid JSON \(line 1, column"):
        load_beam(data)
    chat.write_text('{"turns": []}')
    with pytest.raises(ValueError, match="expected a JSON list of batches, found dict"):
        load_beam(data)


def test_malformed_questions_are_named_by_file_ability_index_and_field(data):
    questions = conversation_file(data, "probing_questions/probing_questions.json")
    edit_json(questions, lambda q: q["information_extraction"][1].pop("answer"))
    with pytest.raises(ValueError) as caught:
        load_beam(data)
    assert str(caught.value).startswith(f"{questions}: information_extraction[1]: no reference answer")
    edit_json(questions, lambda q: q["information_extraction"][1].update(answer="x", question=None))
    with pytest.raises(ValueError, match=r"information_extraction\[1\]: field 'question'"):
        load_beam(data)
    edit_json(questions, lambda q: (q["information_extraction"][1].update(question="When?"), q.update(memory_palace=[])))
    with pytest.raises(ValueError, match="unknown ability 'memory_palace'; BEAM's ten are abstention"):
        load_beam(data)
    (questions.parent / questions.name).unlink()
    with pytest.raises(FileNotFoundError, match="no probing_questions/probing_questions.json"):
        load_beam(data)


def test_eval_runs_a_seed_on_beam_from_the_command_line():
    done = subprocess.run(
        [sys.executable, "-m", "mstar_ray.cli", "eval", str(SEEDS / "selfmem.py"), "--task", "beam",
         "--data", str(FIXTURE), "--size", "100K"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "beam/100K/1 (10 texts written, 11 items;" in done.stdout
    assert "information-extraction" in done.stdout and "temporal-reasoning" in done.stdout
