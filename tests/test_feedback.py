"""The optional ``KnowledgeBase.feedback(query, score)``: checked by the contract, called by the protocol only
on the feedback slice (answered first), never on the questions whose scores are a program's fitness or its
test result; programs without it behave exactly as before; MemRL's utility learns from it."""

from __future__ import annotations

import json

import pytest
import yaml

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.cli import main
from mstar_ray.contract import check_source, inspect_program
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.reflect.smoke import smoke_test
from mstar_ray.sandbox_host.process import Sandbox
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from mstar_ray.search.jobs import EvalJob
from mstar_ray.families.task_registry import load_task
from scripts.fault_resume import table  # (the run's logs, read with plain pyarrow)
from tests.conftest import seed_source

# Shows, in every read, the questions it has had feedback on so far.
RECORDER = '''
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text."
INSTRUCTION_QUERY = "Copy the question."
INSTRUCTION_RESPONSE = "Answer."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str = field(metadata={"description": "the text"})


@dataclass
class Query:
    question: str = field(metadata={"description": "the question"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.texts = []
        self.heard = []

    def write(self, item, raw_text):
        self.texts.append(raw_text)

    def read(self, query):
        return "\\n".join(self.texts[-5:])[-1500:] + "\\nFEEDBACK ON: " + " | ".join(self.heard)

    def feedback(self, query, score):
        self.heard.append(query.question)
'''
DEAF = RECORDER.replace("    def feedback(self, query, score):\n        self.heard.append(query.question)\n", "")


def heard(context: str) -> list[str]:
    tail = context.rsplit("FEEDBACK ON: ", 1)[1]
    return tail.split(" | ") if tail else []


@pytest.fixture(scope="module")
def task():
    full = load_task("synthetic", seed=4)
    return full.model_copy(update={"texts": full.texts[:40], "items": full.items[:10]})


def run(source, task, **kwargs):
    return evaluate(source, task, OfflineBackend(), HashingEmbedder(), **kwargs)


# --------------------------------------------------------------------------------------------------
# the contract
# --------------------------------------------------------------------------------------------------


def test_the_contract_knows_whether_a_program_takes_feedback():
    assert inspect_program(RECORDER).has_feedback and not inspect_program(DEAF).has_feedback
    assert not inspect_program(seed_source("vector_search")).has_feedback


@pytest.mark.parametrize("signature", ["def feedback(self, query)", "async def feedback(self, query, score)",
                                       "def feedback(self, query, score, *, weight)"])
def test_a_feedback_method_with_the_wrong_signature_is_a_violation(signature):
    program = RECORDER.replace("def feedback(self, query, score)", signature)
    line = program.splitlines().index(f"    {signature}:") + 1
    violations = check_source(program)
    assert [(v.line, v.code) for v in violations] == [(line, "signature")], violations
    assert "feedback" in violations[0].message


# --------------------------------------------------------------------------------------------------
# the protocol
# --------------------------------------------------------------------------------------------------


def test_feedback_goes_to_the_slice_only_which_is_answered_first(task):
    slice_ = [q.id for q in task.items[-3:]]
    report = run(RECORDER, task, feedback_ids=slice_)
    assert report.violation is None and report.calls["feedback"] == 3
    assert [r.id for r in report.results] == [q.id for q in task.items]  # reported in the task's order
    taught = [q.question for q in task.items[-3:]]
    for result in report.results:
        if result.id in slice_:  # the slice came first, each one after the feedback of those before it
            assert heard(result.context) == taught[: taught.index(result.question)]
        else:
            assert heard(result.context) == taught


def test_programs_without_feedback_run_exactly_as_before(task):
    slice_ = [q.id for q in task.items[-3:]]
    for program in (DEAF, seed_source("vector_search"), seed_source("experience_learner")):
        plain, given = run(program, task), run(program, task, feedback_ids=slice_)
        assert given.calls["feedback"] == 0
        assert [r.model_dump(exclude={"seconds"}) for r in given.results] == \
            [r.model_dump(exclude={"seconds"}) for r in plain.results]


def test_a_job_never_asks_for_feedback_on_a_question_it_scores(task):
    ids = [q.id for q in task.items]
    with pytest.raises(ValueError, match="feedback on items whose scores are reported"):
        EvalJob(candidate_id="c", source=RECORDER, purpose="search", task_name=task.name, texts=task.texts,
                items=task.items, static_ids=ids[:5], feedback_ids=ids[4:])


def test_the_smoke_test_gives_feedback_to_a_program_that_takes_it():
    assert smoke_test(RECORDER, HashingEmbedder()) is None and smoke_test(seed_source("memrl"), HashingEmbedder()) is None
    broken = RECORDER.replace("self.heard.append(query.question)", "self.heard.append(query.missing_field)")
    assert smoke_test(broken, HashingEmbedder()).startswith("smoke test: feedback() failed: exception: AttributeError")


def test_memrl_feedback_lowers_the_utility_of_what_it_used():
    texts = [f"[{day} June 2024] Ana: the spare key for the shed is in drawer number {day}" for day in range(1, 9)]
    query = {"intent": "where is the spare key for the shed"}
    embedder = HashingEmbedder()
    with Sandbox(seed_source("memrl"), limits=SandboxLimits(call_timeout_s=30), embed=embedder.embed) as sandbox:
        assert sandbox.start().ok
        for text in texts:
            assert sandbox.write({"intent": "where things are kept", "experience": text}, text).ok
        first = sandbox.read(query)
        assert sandbox.feedback(query, 0.0).ok  # the answer built from these memories was wrong
        second = sandbox.read(query)
    shown = lambda context: {t for t in texts if t in context}  # noqa: E731
    assert len(shown(first.value)) == 6  # SELECTED of the 8 candidates
    left_out = set(texts) - shown(first.value)
    assert left_out <= shown(second.value)  # untried memories now beat the ones that failed


# --------------------------------------------------------------------------------------------------
# the search: feedback on rotating questions before static ones, on static ones before the test
# --------------------------------------------------------------------------------------------------


def test_a_search_gives_feedback_on_rotating_and_static_questions_only(tmp_path):
    (tmp_path / "recorder.py").write_text(RECORDER)
    config = {
        "task": {"name": "synthetic", "seed": 1, "limit": 16},
        "split": {"static_size": 4, "rotating_size": 2, "train_ratio": 2.0, "test_fraction": 0.25},
        "search": {"seeds": ["recorder.py"], "max_candidates": 1, "reflections_in_flight": 1,
                   "evaluations_in_flight": 1},
        "llm": {"embedding": {"kind": "hashing"}},
        "ray": {"num_cpus": 2},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir = tmp_path / "run"
    assert main(["run", str(path), "--run-dir", str(run_dir)]) == 0
    split = json.loads((run_dir / "split.json").read_text())
    rows = table(run_dir, "results")
    recorder = next(c["id"] for c in table(run_dir, "candidates") if c["commit_message"] == "seed recorder")
    mine = [r for r in rows if r["candidate"] == recorder and r["split"] in ("static", "rotating")]
    rotating = [r["question"] for r in mine if r["split"] == "rotating"]
    assert len(rotating) == 2 and sorted(r["question_id"] for r in mine if r["split"] == "static") == sorted(split["static"])
    for row in mine:
        assert set(heard(row["context"])) <= set(rotating)  # never feedback on a static question
        if row["split"] == "static":
            assert sorted(heard(row["context"])) == sorted(rotating)
    summary = json.loads((run_dir / "summary.json").read_text())
    tested = {summary["best"]["id"], summary["best_seed"]["id"]}
    test_rows = [r for r in rows if r["split"] == "test"]
    assert {r["question_id"] for r in test_rows} == set(split["test"])  # the feedback slice is not logged
    assert recorder in tested  # the only seed is the best seed, tested beside the best
    static_questions = {r["question"] for r in mine if r["split"] == "static"}
    recorder_test_rows = [r for r in test_rows if r["candidate"] == recorder]
    assert recorder_test_rows and all(set(heard(r["context"])) == static_questions for r in recorder_test_rows)
    # a confirmation, like the test, is a side evaluation: its feedback slice is the static questions
    confirmation = [r for r in rows if r["split"] == "confirmation" and r["candidate"] == recorder]
    assert all(set(heard(r["context"])) == static_questions for r in confirmation)
