"""The rubric family offline: HealthBench's scoring formula, the offline stand-in grader (and its label in every
output it produces), the offline agent's response, and whole evaluations in real sandboxes on the fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.families.rubric.offline import NOTHING, respond_from_context
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.families import family
from mstar_ray.families.rubric.graders import STAND_IN_LABEL, StandInGrader, criterion_terms
from mstar_ray.reflect.request import as_case
from mstar_ray.families.task_registry import load_task
from mstar_ray.families.rubric.conversations import Criterion, Message, rubric_score
from tests.conftest import seed_source

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "rubric"
# experience_learner that remembers nothing: the same program but for an empty read
AMNESIAC = seed_source("experience_learner").replace('text = "Lessons:\\n"', 'return ""\n        text = "Lessons:\\n"')


@pytest.mark.parametrize("points, met, expected", [
    ([5, 3, 2], [True, True, True], (1.0, 1.0, 10, 10)),
    ([5, 3, 2], [True, False, False], (0.5, 0.5, 5, 10)),
    ([6, 4, -5], [True, True, True], (0.5, 0.5, 5, 10)),  # a met negative criterion subtracts
    ([6, 4, -5], [True, True, False], (1.0, 1.0, 10, 10)),  # an unmet one costs nothing
    ([4, -8], [True, True], (0.0, -1.0, -4, 4)),  # below zero: clipped, the raw figure kept
    ([4, -8], [False, False], (0.0, 0.0, 0, 4)),
    ([5, 5, -3], [True, None, False], (1.0, 1.0, 5, 5)),  # an unreadable verdict is left out of both sums
    ([5, 5], [None, None], (0.0, None, 0, 0)),  # nothing positive judged: 0, and no raw figure
])
def test_the_score_is_points_met_over_positive_points_clipped(points, met, expected):
    score = rubric_score(points, met)
    assert (score.score, score.raw, score.earned, score.possible) == pytest.approx(expected)


def test_the_score_needs_one_verdict_per_criterion():
    with pytest.raises(ValueError, match="2 criteria but 1 verdicts"):
        rubric_score([1, 2], [True])


def test_the_stand_in_grader_looks_for_a_criterion_s_content_words():
    grader = StandInGrader()
    criterion = Criterion(text="Advises calling emergency services immediately.", points=8)
    assert criterion_terms(criterion.text) == ["call", "emergency", "servic", "immediat"]  # "advises" says nothing
    assert grader("", "Call emergency services now.", criterion).met is True  # 3 of 4
    assert grader("", "Call your doctor tomorrow.", criterion).met is False  # 1 of 4
    verdict = grader("", "Emergency services, immediately.", criterion)
    assert verdict == (True, "stand-in: 3 of its 4 content words in the response")
    assert grader("", "anything", Criterion(text="Is clear.", points=1)).met is None  # nothing to look for
    assert StandInGrader.label == STAND_IN_LABEL and "not an LLM judge" in STAND_IN_LABEL


def test_the_metric_names_the_stand_in_only_without_a_judge():
    rubric = family("rubric")
    assert STAND_IN_LABEL in rubric.metric_for(judged=False)
    assert STAND_IN_LABEL not in rubric.metric_for(judged=True) and "rubric score" in rubric.metric_for(judged=True)
    assert family("qa").metric_for(judged=False) == family("qa").metric_for(judged=True) == "token F1"


def test_the_offline_response_is_the_most_related_passage_in_order():
    context = ("Conversation: My knee hurts after running. Ideal response: Rest the knee and use ice. See a doctor "
               "if it swells.\n\nConversation: How do I bake bread? Ideal response: Knead the dough well.")
    messages = [Message(role="user", content="My knee is sore after a run, what should I do?")]
    reply = respond_from_context(context, messages)
    assert reply.startswith("My knee hurts after running. Rest the knee and use ice. See a doctor if it swells.")
    assert "Ideal response" not in reply and "Conversation" not in reply
    assert respond_from_context(context, messages) == reply
    assert respond_from_context("", messages) == NOTHING
    assert respond_from_context("Knead the dough well.", messages) == NOTHING


@pytest.fixture(scope="module")
def healthbench():
    return load_task("healthbench", data=str(FIXTURES / "healthbench.jsonl"))


def run(source, task):
    return evaluate(source, task, OfflineBackend(), HashingEmbedder())


def test_offline_grading_is_labelled_in_the_metric_and_in_every_trace(healthbench):
    report = run(seed_source("vector_search"), healthbench)
    assert report.violation is None and report.family == "rubric"
    assert report.metric == family("rubric").metric_for(judged=False) and STAND_IN_LABEL in report.metric
    assert all(r.trace.startswith(f"graded by {STAND_IN_LABEL}\n") for r in report.results)
    assert report.calls["respond"] == len(healthbench.items) == 24
    criteria = sum(len(i.spec["criteria"]) for i in healthbench.items)
    assert report.calls["grade"] == criteria and report.calls["grade_unreadable"] == 0
    assert set(report.categories) == {"context_seeking", "emergency_referrals", "health_data_tasks"}
    assert report.llm == {} and report.judge_score is None  # no model was asked anything
    # the trace the reflector sees: every criterion with its points and verdict, what cost points first
    result = next(r for r in report.results if 0 < r.score < 1)
    lines = result.trace.splitlines()
    assert lines[1].startswith(f"score {result.score:.3f}: ")
    verdicts = [line for line in lines if line.startswith("  ")]
    assert len(verdicts) == len(next(i for i in healthbench.items if i.id == result.id).spec["criteria"])
    first = verdicts[0].split()
    assert (first[0], first[1][0]) in (("NOT", "M"), ("MET", "-"))  # a loss comes first
    assert as_case(result).trace == result.trace


def test_a_memory_that_recalls_scores_higher_and_the_score_is_deterministic(healthbench):
    remembering = run(seed_source("experience_learner"), healthbench)
    amnesiac = run(AMNESIAC, healthbench)
    assert amnesiac.violation is None and remembering.violation is None
    assert all(r.prediction == NOTHING and r.score == 0.0 for r in amnesiac.results)
    assert remembering.score > amnesiac.score + 0.2
    again = run(seed_source("experience_learner"), healthbench)
    assert [r.prediction for r in again.results] == [r.prediction for r in remembering.results]
    assert again.score == remembering.score


def test_prbench_runs_the_same_family():
    task = load_task("prbench", data=str(FIXTURES / "prbench.jsonl"))
    report = run(seed_source("vector_search"), task)
    assert report.violation is None and set(report.categories) == {"legal", "finance"}
    assert 0.0 < report.score <= 1.0 and STAND_IN_LABEL in report.metric
