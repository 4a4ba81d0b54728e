"""The choice family (multiple choice, the docs' example of a whole family in one module) and its task: the
fixture loads with every problem named by file, line and field; an evaluation in a real sandbox with the offline
agent picks from what memory returned (and nothing from an empty memory), with items at once giving what one
after another gives; and through a scripted model every item is one ``choose`` request whose reply is read by
its letter."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.agent.concurrency import SERIAL, EvalConcurrency
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.exit_codes import InputError
from mstar_ray.families import family
from mstar_ray.families.choice import Asked, ChoiceSpec, picked
from mstar_ray.families.task_registry import load_task
from tests.conftest import seed_source
from tests.scripted_server import ScriptedServer
from tests.test_eval_pipeline import model_reply, with_model

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "choice"
# A memory that keeps nothing: whatever is asked, read() returns "".
FORGETFUL = seed_source("vector_search").replace("    def read(self, query: Query) -> str:\n",
                                                 "    def read(self, query: Query) -> str:\n        return ''\n")


@pytest.fixture(scope="module")
def task():
    return load_task("choice", data=str(FIXTURE))


def offline(source, task, concurrency=SERIAL):
    backend = OfflineBackend()
    backend.waits = True  # let the wide run overlap its items as a model's would
    report = evaluate(source, task, backend, HashingEmbedder(), concurrency=concurrency)
    assert report.violation is None, report.violation
    return report


def test_the_fixture_is_a_choice_task(task):
    assert (task.name, task.family, len(task.texts), len(task.items)) == ("choice/choice", "choice", 12, 16)
    assert {item.category for item in task.items} == {"who", "what", "where"}
    for item in task.items:
        assert item.answer in ChoiceSpec.model_validate(item.spec).options and item.evidence


def _rewrite(tmp_path: Path, line: int, **change) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "texts.jsonl").write_text((FIXTURE / "texts.jsonl").read_text())
    records = [json.loads(text) for text in (FIXTURE / "questions.jsonl").read_text().splitlines()]
    records[line - 1].update(change)
    (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


@pytest.mark.parametrize("line, change, expected", [
    (3, {"answer": "Mara"}, "line 3: field '<record>': Value error, the answer 'Mara' is none of the options"),
    (2, {"options": ["Oskar", "oskar "]}, "line 2: field '<record>': Value error, the options must be distinct"),
    (4, {"options": ["Ines"], "answer": "Ines"}, "line 4: field 'options': List should have at least 2 items"),
    (5, {"evidence": ["t99"]}, "line 5: field 'evidence': 't99' is no text or unit id of texts.jsonl"),
    (6, {"id": "q1"}, "line 6: field 'id': 'q1' is already the id of line 1"),
    (7, {"colour": "red"}, "line 7: field 'colour': Extra inputs are not permitted"),
])
def test_a_bad_question_is_refused_naming_file_line_and_field(tmp_path, line, change, expected):
    folder = _rewrite(tmp_path, line, **change)
    with pytest.raises(InputError) as refused:
        load_task("choice", data=str(folder))
    assert str(refused.value).startswith(f"{folder / 'questions.jsonl'}: {expected}")


def test_the_data_is_required():
    with pytest.raises(InputError, match="task choice needs data"):
        load_task("choice")


def test_offline_the_agent_picks_from_what_memory_returned(task):
    report = offline(seed_source("vector_search"), task)
    assert (report.family, report.metric) == ("choice", "accuracy (the right option picked)")
    assert report.calls["query"] == report.calls["choose"] == len(task.items)
    assert report.score >= 0.75
    for result in report.results:
        assert result.context and result.score == float(result.prediction == result.expected)
        assert re.fullmatch(r"picked [A-D] \(.+\); the right option is [A-D] \(.+\)", result.trace), result.trace
    forgetful = offline(FORGETFUL, task)
    assert forgetful.score == 0.0 and {r.prediction for r in forgetful.results} == {""}
    assert all(r.trace.startswith("picked no option; the right option is ") for r in forgetful.results)


def test_items_at_once_give_what_one_after_another_gives(task):
    serial = offline(seed_source("vector_search"), task)
    wide = offline(seed_source("vector_search"), task, EvalConcurrency(in_flight=8, episodes=2))
    strip = lambda report: [r.model_dump(exclude={"seconds"}) for r in report.results]  # noqa: E731
    assert strip(wide) == strip(serial) and wide.calls == serial.calls


def choosing_model(messages: list[dict]) -> str:
    """The scripted model: "B." to every choose prompt; the others as the pipeline's tests answer them."""
    prompt = messages[-1]["content"]
    return "B." if prompt.endswith("Reply with the letter of one option.") else model_reply(messages)


def test_through_a_model_each_item_is_one_request_read_by_its_letter(task):
    with ScriptedServer(reply_for=choosing_model) as server:
        report = with_model(server.base_url, seed_source("vector_search"), task, SERIAL)
        prompts = [m[-1]["content"] for m in server.prompts if m[-1]["content"].endswith("one option.")]
    assert report.violation is None and report.calls["choose"] == report.llm["choose"].requests == len(task.items)
    assert len(prompts) == len(task.items)
    for item, result, prompt in zip(task.items, report.results, prompts):
        options = ChoiceSpec.model_validate(item.spec).options
        assert result.prediction == options[1] and result.score == float(options[1] == item.answer)
        assert f"Question: {item.question}\nOptions:\n" + "\n".join(
            f"{letter}. {option}" for letter, option in zip("ABCD", options)) in prompt
        assert prompt.startswith("Memory:\n")
    assert report.score == sum(ChoiceSpec.model_validate(i.spec).options[1] == i.answer for i in task.items) / 16


@pytest.mark.parametrize("reply, expected", [
    ("B", "Oslo"), ("B.", "Oslo"), ("(C) Quito", "Quito"), ("C: Quito", "Quito"), ("  Lisbon, I think", "Lisbon"),
    ("A dog would know: Quito", "Quito"), ("Lisbon or Oslo", ""), ("E", ""), ("no idea", ""),
])
def test_a_reply_is_read_by_its_letter_else_by_one_option_it_names(reply, expected):
    assert picked(reply, Asked("Where?", ("Lisbon", "Oslo", "Quito"))) == expected


def test_the_family_is_registered_with_its_step_and_brief():
    choice = family("choice")
    assert choice.steps == ("choose",) and choice.overlap.across_items and not choice.overlap.helper_process
    assert "picks one option" in choice.brief


def test_eval_on_the_fixture_from_the_command_line():
    done = subprocess.run(
        [sys.executable, "-m", "mstar_ray.cli", "eval", "seeds/vector_search.py", "--task", "choice",
         "--data", "tests/fixtures/choice", "--embedder", "hashing"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "family choice, scored by accuracy (the right option picked)" in done.stdout
    assert re.search(r"\bchoose 16\b", done.stdout), done.stdout
