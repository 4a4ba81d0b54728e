"""The episode family end to end on real TextWorldExpress games and real sandboxes: one read per episode, success
scored 1, the step limit, the transcript as the trace; an environment that hangs or crashes mid-episode is that
episode's scored failure and the evaluation goes on."""

from __future__ import annotations

import os
import re
import signal

import pytest

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.envs.env_process import shared
from mstar_ray.families import family
from mstar_ray.families.task_registry import load_task
from tests.conftest import seed_source

SMALL = {"train_games": 10, "validation_games": 4, "test_games": 2}

# A memory that says how many times read() was called: each episode must see the count go up by exactly one.
READ_COUNTER = seed_source("experience_learner").replace(
    "    def read(self, query: Query) -> str:\n",
    "    def read(self, query: Query) -> str:\n        self.reads = getattr(self, 'reads', 0) + 1\n"
    "        return f'reads so far: {self.reads}'\n")


def run(source, task, backend=None):
    report = evaluate(source, task, backend or OfflineBackend(), HashingEmbedder())
    assert report.violation is None, report.violation
    return report


def actions_in(trace: str) -> list[str]:
    return [line[len("ACTION: "):] for line in trace.splitlines() if line.startswith("ACTION: ")]


@pytest.fixture(scope="module")
def twc():
    return load_task("twc", **SMALL)


def test_an_episode_is_played_from_its_opening_and_scored_by_success(twc):
    report = run(seed_source("experience_learner"), twc)
    assert (report.family, report.metric) == ("episode", "success") and set(report.categories) == {"seen", "unseen"}
    assert report.calls["query"] == len(twc.items)  # one read per episode
    assert report.calls["act"] == sum(len(actions_in(r.trace)) for r in report.results) > len(twc.items)
    items = {item.id: item for item in twc.items}
    for result in report.results:
        lines = result.trace.splitlines()
        assert lines[0].startswith("OBJECTIVE: ") and lines[1].startswith("OBSERVATION: You are in")
        assert result.question == items[result.id].question and result.expected == items[result.id].answer
        assert result.context and result.query and result.error is None and result.seconds > 0
        taken = len(actions_in(result.trace))
        if result.score == 1.0:
            assert result.prediction == f"success after {taken} action{'s' * (taken != 1)}" and taken <= 12
        else:
            assert result.score == 0.0 and taken == 12
            assert result.prediction == "failure: the step limit (12 actions) was reached"
        assert lines[-1] == f"OUTCOME: {result.prediction}"
    assert {r.score for r in report.results} == {0.0, 1.0}


def test_read_is_called_once_at_the_start_of_each_episode(twc):
    report = run(READ_COUNTER, twc)
    assert [r.context for r in report.results] == [f"reads so far: {i}" for i in range(1, len(twc.items) + 1)]


def test_the_step_limit_ends_an_episode(twc):
    short = load_task("twc", step_limit=3, **SMALL)
    report = run(seed_source("experience_learner"), short)
    assert report.score == 0.0  # no expert solves a twc game of two objects in three actions
    assert all(len(actions_in(r.trace)) == 3 and "step limit (3 actions)" in r.prediction for r in report.results)


class FaultyAgent(OfflineBackend):
    """The offline agent, which at the second action of the given episodes does something to the environment's
    process first (stops it, kills it): the faults of a real engine, injected from outside it. It remembers which
    episode (in playing order) each fault went to, so the test checks those episodes whatever came before."""

    def __init__(self, faults):
        super().__init__()
        self.faults, self.episode, self.injected = faults, -1, {}

    def perform(self, step, shown, turn):
        if step.name != "act":
            return super().perform(step, shown, turn)
        if not turn.history:
            self.episode += 1
        elif len(turn.history) == 1 and self.episode in self.faults and self.episode not in self.injected:
            pid = shared("textworld_express").pid
            assert pid is not None, "the environment's process was not running at the second action"
            self.faults[self.episode](pid)
            self.injected[self.episode] = pid
        return super().perform(step, shown, turn)


def test_a_hang_and_a_crash_mid_episode_are_scored_failures_and_the_evaluation_goes_on():
    task = load_task("twc", step_timeout_s=3, **SMALL)
    env = shared("textworld_express")
    before = env.started
    agent = FaultyAgent({1: lambda pid: os.killpg(pid, signal.SIGSTOP), 3: lambda pid: os.killpg(pid, signal.SIGKILL)})
    report = run(seed_source("experience_learner"), task, agent)
    seen = [(r.id, r.prediction, r.error) for r in report.results]
    assert sorted(agent.injected) == [1, 3], seen
    hung = [r for r in report.results if r.error and "did not answer the action" in r.error]
    # The kill lands before the action is sent or while it is answered: either way the process died under it.
    crashed = [r for r in report.results if r.error and re.search(r"its process died (before|during) the action", r.error)]
    assert len(hung) == len(crashed) == 1, seen
    (hung,), (crashed,) = hung, crashed
    assert "within 3 s; it was killed" in hung.error, seen
    for broken in (hung, crashed):
        assert broken.score == 0.0 and broken.prediction == "failure: the environment broke after 1 action", seen
        assert len(actions_in(broken.trace)) == 2 and broken.trace.splitlines()[-1].startswith("OUTCOME: failure: the environment")
    others = [r for r in report.results if r is not hung and r is not crashed]
    assert all(r.error is None and actions_in(r.trace) for r in others), seen  # every other episode was played
    assert any(r.score == 1.0 for r in others)
    assert env.started == before + 2  # a fresh process after each fault, then kept


def test_the_family_is_registered_with_its_brief():
    episode = family("episode")
    assert episode.steps == ("act",) and "read() is called once" in episode.brief and "transcript" in episode.brief
