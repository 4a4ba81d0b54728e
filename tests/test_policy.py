"""The search policy without Ray: driven through its own loop (``SearchPolicy.drive``) by a plain in-process
pool whose workers answer at once, with the real run directory, split, structure index and incumbent.

The workers are stand-ins on purpose: what is under test is the order in which work is handed out and what a
result does to the search's state, which must not depend on how a model would have scored a program.
"""

from __future__ import annotations

import collections
import io
from pathlib import Path

import pytest

from mstar_ray.search_loop.policy import MAX_CRASHES_PER_CANDIDATE, SearchPolicy
from mstar_ray.driver.progress import Progress, ProgressState
from mstar_ray.driver.recorder import RunRecorder
from mstar_ray.driver.run_dir import RunDir
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.program_id import program_id
from mstar_ray.reflect.reflector import Child, ReflectionOutcome
from mstar_ray.reflect.request import LineageEntry
from mstar_ray.results import EvalReport, ItemResult, RuntimeViolation, SandboxInfo, summarise
from mstar_ray.run_config import RunConfig
from mstar_ray.search.jobs import EvalJob, EvalOutcome, static_score
from mstar_ray.search.split import SplitPlan
from mstar_ray.search.work import Crashed, Done, Finished, Work
from mstar_ray.state.candidate import Seed
from mstar_ray.state.replay import restore
from mstar_ray.families.qa.synthetic import make_synthetic
from tests.conftest import SEEDS

SEED_NAMES = ("vector_search", "experience_learner")


def score_of(source: str, question: str = "") -> float:
    """A stand-in fitness: each reflection adds one constant, worth a little more than the last."""
    return min(1.0, 0.1 + 0.05 * source.count("STEP_"))


def evaluate(job: EvalJob, score_of=score_of) -> EvalOutcome:
    # The answer stands for the score: two programs answer a question alike when they score it alike.
    results = [ItemResult(id=q.id, category=q.category, question=q.question, expected=q.answer,
                          prediction=f"{score:.6f}", score=score)
               for q in job.items for score in [score_of(job.source, q.id)]]
    overall, categories = summarise(results)
    report = EvalReport(task="synthetic", backend="stand-in", embedder="hashing", texts_written=len(job.texts),
                        score=overall, categories=categories, results=results, calls={}, wall_seconds=0.0,
                        sandbox=SandboxInfo(layers=[], missing_layers={}, ready_seconds=None))
    return EvalOutcome(candidate_id=job.candidate_id, purpose=job.purpose, report=report,
                       static_score=static_score(report, job.static_ids), node_id="here", worker_pid=0)


def reflect(request) -> ReflectionOutcome:
    source = request.parent_source + f"\nSTEP_{request.iteration} = {request.iteration}\n"
    return ReflectionOutcome(result=Child(
        id=program_id(source), source=source, parent=request.parent_id, origin="reflection",
        commit_message=f"step {request.iteration}", iteration=request.iteration, patch=None, edit_format="file",
        attempts=1))


class InProcessPool:
    """Workers that run the moment they are waited for, oldest submission first. ``crash`` names
    candidates whose evaluator dies under them (every time)."""

    def __init__(self, evaluators: int, reflectors: int, crash: frozenset[str] = frozenset(), score_of=score_of):
        self.size = {"evaluate": evaluators, "reflect": reflectors}
        self.crash = crash
        self.score_of = score_of
        self.jobs: list[EvalJob] = []  # every evaluation handed out, in order
        self.running: list[Work] = []
        self.handed: list[tuple[str, int]] = []  # (kind, works in flight after the submission)
        self.together: set[tuple[int, int]] = set()  # (evaluations, reflections) in flight at once

    def idle(self, kind: str) -> int:
        return self.size[kind] - sum(1 for work in self.running if work.kind == kind)

    def busy(self) -> bool:
        return bool(self.running)

    def submit(self, work: Work) -> None:
        assert self.idle(work.kind) > 0, "the policy handed out more work than there are idle workers"
        self.running.append(work)
        self.handed.append((work.kind, len(self.running)))
        if work.kind == "evaluate":
            self.jobs.append(work.payload)
        self.together.add((self.size["evaluate"] - self.idle("evaluate"), self.size["reflect"] - self.idle("reflect")))

    def next_finished(self, timeout_s: float) -> list[Done]:
        work = self.running.pop(0)
        if work.kind == "evaluate":
            if work.payload.candidate_id in self.crash:
                return [Crashed(work, "ActorDiedError: the worker died")]
            return [Finished(work, evaluate(work.payload, self.score_of))]
        return [Finished(work, reflect(work.payload))]


def make_policy(tmp_path: Path, *, evaluators: int = 1, reflectors: int = 1, max_candidates: int = 4,
                seeds=SEED_NAMES, llm: dict | None = None, **search) -> tuple[SearchPolicy, list]:
    config = RunConfig.model_validate({
        "task": {"name": "synthetic", "seed": 1},
        "split": {"static_size": 6, "rotating_size": 2, "train_ratio": 2.0},
        "search": {"max_candidates": max_candidates, "reflections_in_flight": reflectors,
                   "evaluations_in_flight": evaluators, "reflector": "offline", **search},
        "llm": {"embedding": {"kind": "hashing"}, **(llm or {})},
    })
    task = make_synthetic(seed=1)
    plan = SplitPlan(task, HashingEmbedder(), test_fraction=config.split.test_fraction, static_size=6,
                     rotating_size=2, train_ratio=2.0, seed=0,
                     screen_size=config.search.cascade.slice_size if config.search.cascade else 0)
    run_dir = RunDir(tmp_path / "run")
    run_dir.write_split(plan.split)
    policy = SearchPolicy(config, task, plan, RunRecorder(run_dir, Progress(io.StringIO()), ProgressState()),
                          evaluators=evaluators, llm_spent=lambda: None)
    candidates = [Seed(name, (SEEDS / f"{name}.py").read_text()).candidate() for name in seeds]
    return policy, candidates


def test_with_one_reflector_and_one_evaluator_it_is_the_papers_sequential_loop(tmp_path: Path):
    policy, seeds = make_policy(tmp_path, max_candidates=4)
    pool = InProcessPool(evaluators=1, reflectors=1)
    sizes = []  # the population each reflection chose its parent from
    original = policy._reflection_request
    policy._reflection_request = lambda iteration: (sizes.append(len(policy.state.population)), original(iteration))[1]
    policy.start(seeds, None)
    policy.drive(pool)
    # the seeds one at a time, then reflect, evaluate, add, reflect ... with never two pieces of work in flight
    assert pool.handed == [("evaluate", 1)] * 2 + [("reflect", 1), ("evaluate", 1)] * 4
    assert sizes == [2, 3, 4, 5]  # each reflection saw the child of the one before in the population
    members = policy.state.members
    assert [m.origin for m in members] == ["seed", "seed", *["reflection"] * 4]
    assert [m.iteration for m in members[2:]] == [1, 2, 3, 4]
    assert policy.state.evaluated == 4 and policy.stop_reason().kind == "max_candidates"


def test_with_more_workers_it_keeps_them_busy_without_piling_up_children(tmp_path: Path):
    policy, seeds = make_policy(tmp_path, evaluators=2, reflectors=2, max_candidates=6)
    pool = InProcessPool(evaluators=2, reflectors=2)
    policy.start(seeds, None)
    policy.drive(pool)
    assert (2, 0) in pool.together and (0, 2) in pool.together  # both seeds at once; two reflections at once
    assert any(e and r for e, r in pool.together)  # reflections and evaluations side by side
    # no reflection starts before every seed is scored: parents come from the population
    first_reflection = next(i for i, (kind, _) in enumerate(pool.handed) if kind == "reflect")
    assert [kind for kind, _ in pool.handed[:first_reflection]] == ["evaluate", "evaluate"]
    assert policy.state.evaluated == 6 and len(policy.state.members) == 8


def test_an_evaluator_that_dies_is_replaced_and_a_candidate_that_keeps_killing_them_fails(tmp_path: Path):
    policy, seeds = make_policy(tmp_path, max_candidates=2, seeds=SEED_NAMES[:1])
    killer = reflect_once(policy, seeds)
    pool = InProcessPool(evaluators=1, reflectors=1, crash=frozenset({killer}))
    policy.drive(pool)
    handed_to_killer = sum(1 for kind, _ in pool.handed if kind == "evaluate") - 2  # the seed and one more child
    assert handed_to_killer == MAX_CRASHES_PER_CANDIDATE
    assert policy.state.crashes[killer] == MAX_CRASHES_PER_CANDIDATE
    notes = [note.note for note in policy.state.child_notes[seeds[0].id]]
    assert any(note.startswith("evaluation failed: evaluators died 2 times") for note in notes)
    assert killer not in policy.state.population and policy.state.evaluated == 2  # counted: the budget moved on


def reflect_once(policy: SearchPolicy, seeds) -> str:
    """Start the search and say which id its first child will have."""
    policy.start(seeds, None)
    return program_id(seeds[0].source + "\nSTEP_1 = 1\n")


def test_a_child_equal_to_a_known_program_is_a_duplicate_and_its_parent_hears_so(tmp_path: Path):
    policy, seeds = make_policy(tmp_path, max_candidates=1, seeds=SEED_NAMES[:1])
    pool = InProcessPool(evaluators=1, reflectors=1)
    policy.start(seeds, None)
    policy.drive(pool)
    child = policy.state.members[-1]
    again = Child(**{**child.identity(), "iteration": 2}, patch=None, edit_format="file", attempts=1)
    request = Work("reflect", policy._reflection_request(2))
    policy.flying.append(request)
    policy.accept(Finished(request, ReflectionOutcome(result=again)))
    assert policy.state.duplicates == 1 and child.id not in [c.id for c in policy.waiting]
    note = policy.state.child_notes[child.parent][-1]  # the duplicate names its own parent
    assert note.id == child.id and "identical to a program already evaluated" in note.note


def test_every_reflection_hears_which_parts_no_child_of_the_run_moved_a_score_by(tmp_path: Path):
    policy, seeds = make_policy(tmp_path, max_candidates=2)
    policy.start(seeds, None)
    policy.drive(InProcessPool(evaluators=1, reflectors=1))
    assert policy._reflection_request(3).inert_parts == []  # each stand-in child changed its own constant
    first, second = (m.id for m in policy.state.members[:2])

    def note(parent: str, delta: float, changed: list[str]) -> None:
        policy.state.child_notes[parent].append(LineageEntry(id="c" * 16, relation="child", commit_message="x",
                                                             score=0.2, delta=delta, changed=changed))

    note(first, 0.0, ["TOP_K"])
    assert policy._reflection_request(3).inert_parts == []  # once is the lesson of its own parent
    note(second, 0.0, ["TOP_K", "KnowledgeBase.read"])  # on another parent: the run's lesson
    note(second, 0.04, ["KnowledgeBase.read"])
    assert policy._reflection_request(3).inert_parts == ["TOP_K"]


def test_a_duplicate_of_a_program_still_being_evaluated_gets_its_score_when_that_one_finishes(tmp_path: Path):
    policy, seeds = make_policy(tmp_path, max_candidates=1, seeds=SEED_NAMES[:1])
    pool = InProcessPool(evaluators=1, reflectors=1)
    policy.start(seeds, None)
    run_until(policy, pool, lambda: any(c.origin == "reflection" for c in policy.waiting))
    child = next(c for c in policy.waiting if c.origin == "reflection")
    again = Child(**{**child.identity(), "iteration": 2, "commit_message": "the same again"}, patch=None,
                  edit_format="file", attempts=1)
    request = Work("reflect", policy._reflection_request(2))
    policy.flying.append(request)
    policy.accept(Finished(request, ReflectionOutcome(result=again)))
    note = policy.state.child_notes[child.parent][-1]
    assert note.commit_message == "the same again" and note.score is None  # its original has no score yet
    policy.drive(pool)
    scored = policy.state.population.get(child.id).score
    seed_score = policy.state.population.get(child.parent).score
    note = policy.state.child_notes[child.parent][-1]
    assert note.score == scored and note.delta == pytest.approx(scored - seed_score)
    policy.stopped()
    policy.observer.run_dir.close()
    replayed = restore(policy.observer.run_dir.path).child_notes[child.parent][-1]  # a resume hears the same
    assert (replayed.score, replayed.delta) == (note.score, note.delta)


def run_until(policy: SearchPolicy, pool: InProcessPool, done) -> None:
    """The policy's loop by hand, stopped as soon as ``done()`` holds."""
    while not done():
        for work in policy.next_work(pool.idle("evaluate"), pool.idle("reflect")):
            pool.submit(work)
        for finished in pool.next_finished(0):
            policy.accept(finished)


def test_replaying_the_logs_gives_back_the_state_the_live_search_built(tmp_path: Path):
    policy, seeds = make_policy(tmp_path, evaluators=2, reflectors=2, max_candidates=5)
    policy.start(seeds, None)
    policy.drive(InProcessPool(evaluators=2, reflectors=2))
    policy.stopped()
    policy.observer.run_dir.close()
    live, replayed = policy.state, restore(policy.observer.run_dir.path)
    assert [(m.id, m.score, m.parent) for m in replayed.members] == [(m.id, m.score, m.parent) for m in live.members]
    assert {k: v for k, v in replayed.child_notes.items() if v} == {k: v for k, v in live.child_notes.items() if v}
    for name in ("seen", "pending", "open_reflections", "iterations", "evaluated", "discarded", "violations",
                 "duplicates", "stop"):
        assert getattr(replayed, name) == getattr(live, name), name


def test_a_resume_reissues_what_was_in_flight_and_never_evaluates_a_scored_candidate_again(tmp_path: Path):
    policy, seeds = make_policy(tmp_path, max_candidates=3)
    pool = InProcessPool(evaluators=1, reflectors=1)
    policy.start(seeds, None)
    # stop the "process" with the first child's reflection answered and its evaluation in flight
    while not any(m.origin == "reflection" for m in policy.waiting):
        for work in policy.next_work(pool.idle("evaluate"), pool.idle("reflect")):
            pool.submit(work)
        for done in pool.next_finished(0):
            policy.accept(done)
    policy.observer.run_dir.close()
    state = restore(policy.observer.run_dir.path)
    assert [c.origin for c in state.queue] == ["reflection"] and state.queue[0].source
    resumed, _ = make_policy(tmp_path, max_candidates=3)
    resumed.start(seeds, state, resumed.observer.run_dir.read_program)
    second = InProcessPool(evaluators=1, reflectors=1)
    resumed.drive(second)
    evaluated = collections.Counter(m.id for m in resumed.state.members)
    assert max(evaluated.values()) == 1 and len(resumed.state.members) == 5
    assert second.handed[0] == ("evaluate", 1)  # the queued child first, no seed again


class ViolationPool(InProcessPool):
    """The second reflection's child breaks the contract; the fourth reflection gives that same program again
    with a comment added (structurally identical to it)."""

    def __init__(self) -> None:
        super().__init__(evaluators=1, reflectors=1)
        self.made: dict[int, str] = {}

    def next_finished(self, timeout_s: float) -> list[Done]:
        work = self.running[0]
        if work.kind == "reflect" and work.payload.iteration in (2, 4):
            self.running.pop(0)
            request = work.payload
            source = (request.parent_source + "\nVIOLATE = 2\n" if request.iteration == 2
                      else self.made[2] + "# the same program again\n")
            self.made[request.iteration] = source
            return [Finished(work, ReflectionOutcome(result=Child(
                id=program_id(source), source=source, parent=request.parent_id, origin="reflection",
                commit_message=f"step {request.iteration}", iteration=request.iteration, patch=None,
                edit_format="file", attempts=1)))]
        if work.kind == "evaluate" and "VIOLATE" in work.payload.source:
            self.running.pop(0)
            outcome = evaluate(work.payload)
            report = outcome.report.model_copy(update={"violation": RuntimeViolation(
                phase="read", kind="read_too_long", message="read() returned 9000 characters")})
            return [Finished(work, outcome.model_copy(update={"report": report, "static_score": 0.0}))]
        return super().next_finished(timeout_s)


def _outcome(policy: SearchPolicy) -> list[tuple[str, str]]:
    return [(m.id, m.parent) for m in policy.state.members] + [("duplicates", str(policy.state.duplicates))]


def test_a_resume_after_a_violation_dedups_its_structure_as_the_live_run_did(tmp_path: Path):
    live, seeds = make_policy(tmp_path / "live", max_candidates=6)
    live.start(seeds, None)
    live.drive(ViolationPool())
    assert live.state.violations == 1 and live.state.duplicates == 1  # the repeat of the violated program

    killed, seeds = make_policy(tmp_path / "killed", max_candidates=6)
    pool = ViolationPool()
    killed.start(seeds, None)
    while killed.state.violations == 0:  # the process dies right after the violation is logged
        for work in killed.next_work(pool.idle("evaluate"), pool.idle("reflect")):
            pool.submit(work)
        for done in pool.next_finished(0):
            killed.accept(done)
    killed.observer.run_dir.close()
    resumed, _ = make_policy(tmp_path / "killed", max_candidates=6)
    resumed.start(seeds, restore(resumed.observer.run_dir.path), resumed.observer.run_dir.read_program)
    again = ViolationPool()
    again.made = pool.made  # the stand-in reflector's memory of what it wrote (a model would just write it)
    resumed.drive(again)
    assert _outcome(resumed) == _outcome(live)


@pytest.mark.parametrize("spent", ["budget spent: $0.0100 of $0.01"])
def test_a_spent_llm_budget_stops_new_reflections_and_is_the_stop_reason(tmp_path: Path, spent: str):
    policy, seeds = make_policy(tmp_path, max_candidates=10)
    policy.budget.llm_spent = lambda: spent if len(policy.state.members) >= 3 else None
    policy.start(seeds, None)
    policy.drive(InProcessPool(evaluators=1, reflectors=1))
    assert len(policy.state.members) == 3
    reason = policy.stop_reason()
    assert reason.spent and reason.message == spent


def test_pareto_parents_come_from_the_front(tmp_path: Path):
    policy, seeds = make_policy(tmp_path, max_candidates=5, parent_selection="pareto")
    parents = []
    original = policy._reflection_request

    def recorded(iteration):
        request = original(iteration)
        front = {entry.member.id for entry in policy.parents.front(policy.state.population)}
        parents.append((request.parent_id, front))
        return request

    policy._reflection_request = recorded
    policy.start(seeds, None)
    policy.drive(InProcessPool(evaluators=1, reflectors=1))
    assert len(parents) == 5 and all(parent in front for parent, front in parents)
    # the stand-in scores every question of a program alike, so the front is the newest (best) child each time
    assert [parent for parent, _ in parents[1:]] == [m.id for m in policy.state.members[2:6]]


def test_the_duplicate_message_names_the_parent_and_the_original_once():
    """A child whose id is already known repeats that program's source: the note names its parent and the
    original, never one id twice; a structural duplicate names both ids."""
    from mstar_ray.search_loop.policy import duplicate_message
    from mstar_ray.state.candidate import Candidate

    same = Candidate(id="b7e114297e391ec1", source="x = 1\n", parent="0123456789abcdef", origin="reflection",
                     commit_message="m", iteration=3)
    text = duplicate_message(same, same.id, "identical")
    assert text.count("b7e114297e391ec1") == 1 and "0123456789abcdef" in text and "iteration 3" in text
    other = same.model_copy(update={"id": "fedcba9876543210"})
    text = duplicate_message(other, "b7e114297e391ec1", "structurally identical")
    assert "fedcba9876543210" in text and "b7e114297e391ec1" in text and "structurally identical" in text


def test_what_stops_a_run_is_one_class_of_error():
    """The infrastructure's errors share one base class, which the policy's rule asks for; a spent budget stops
    the run its own way, and anything else a worker raises is its candidate's failure."""
    from mstar_ray.search_loop.policy import infrastructure_failure
    from mstar_ray.envs.base import EnvUnavailable
    from mstar_ray.exit_codes import InfrastructureError
    from mstar_ray.llm.errors import BudgetExceeded, EndpointError, RequestRefused
    from mstar_ray.sandbox_host.jail import SandboxStartError, SandboxUnavailable

    for error in (EndpointError("gone"), RequestRefused("refused", 401), SandboxStartError("no fork server"),
                  SandboxUnavailable({"seccomp": "not here"}), EnvUnavailable("no Java")):
        assert isinstance(error, InfrastructureError) and infrastructure_failure(error), error
    for error in (BudgetExceeded("spent"), ValueError("a bad program"), RuntimeError("a bug"), MemoryError()):
        assert not infrastructure_failure(error), error
