"""The end of a search (``search_loop.endgame``) without Ray: a search driven to its end by an in-process pool, then the
confirmation, the choice, the test and the fallback through the same pool, with one program failing in each phase
({static, confirmation, test}), each way ({raise, violation, timeout, crash, garbage frame}) and each position
({incumbent, contender, seed, fallback}). Whatever fails, the end returns a program that passed its test, records
the failure, names what it passed over, and never hands a crashing program out more than the policy's cap.

The fitness is a stand-in on purpose (per-question scores chosen so that the run has an incumbent, a contender
within the noise and a best seed): what is under test is what a failure does to the end, not a model's scores.
"""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import pytest

from mstar_ray.search_loop.endgame import Endgame, Ending
from mstar_ray.search_loop.policy import MAX_CRASHES_PER_CANDIDATE, FatalRunError, SearchPolicy
from mstar_ray.driver.progress import Progress, ProgressState
from mstar_ray.driver.recorder import RunRecorder
from mstar_ray.driver.run_dir import RunDir
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.exit_codes import InfrastructureError
from mstar_ray.results import EvalReport, ItemResult, RuntimeViolation, SandboxInfo, summarise
from mstar_ray.run_config import RunConfig
from mstar_ray.search.jobs import EvalJob, EvalOutcome, static_score
from mstar_ray.search.split import SplitPlan
from mstar_ray.search.work import Crashed, Done, Finished, Raised, Work
from mstar_ray.state.candidate import Seed
from mstar_ray.families.qa.synthetic import make_synthetic
from scripts.fault_resume import table
from tests.conftest import SEEDS
from tests.test_policy import reflect  # a child is its parent with one more STEP_ line

PHASES = {"static": "search", "confirmation": "confirm", "test": "test"}
MODES = ("raise", "violation", "timeout", "crash", "garbage frame")
ROLES = ("incumbent", "contender", "seed", "fallback")

# Scores per static question (six of them) and on every other question, for the best seed S1, the other seed S2,
# and the children R and C. In each scenario a different program holds each position, so that every position
# takes part in every phase it can: "confirmed" (R replaces S1 beyond the noise and is the incumbent, C is a
# contender within the noise and wins the confirmation), "kept" (the same, but R wins the confirmation, so the
# incumbent is the program tested) and "seed" (no child is better beyond the noise: the best seed is the
# incumbent and is confirmed against C).
SCENARIOS = {
    "confirmed": {"S1": ([0.5] * 6, 0.5), "S2": ([0.3] * 6, 0.3), "R": ([0.7] * 6, 0.7),
                  "C": ([1.0, 0.4, 1.0, 0.7, 0.7, 0.7], 0.8)},
    "kept": {"S1": ([0.5] * 6, 0.5), "S2": ([0.3] * 6, 0.3), "R": ([0.7] * 6, 0.7),
             "C": ([1.0, 0.4, 1.0, 0.7, 0.7, 0.7], 0.6)},
    "seed": {"S1": ([0.5] * 6, 0.5), "S2": ([0.3] * 6, 0.3), "R": ([0.45] * 6, 0.45),
             "C": ([0.8, 0.2, 0.8, 0.5, 0.5, 0.5], 0.8)},
}
# Where a position takes part in a phase only in another scenario than the first.
SCENARIO_FOR = {("test", "incumbent"): "kept", ("confirmation", "seed"): "seed"}


def name_of(source: str) -> str:
    """Which program a source is: a seed by its text, a child by the last step a reflection added."""
    steps = [line for line in source.splitlines() if line.startswith("STEP_")]
    if steps:
        return {"STEP_1 = 1": "R", "STEP_2 = 2": "C"}[steps[-1]]
    return "S1" if source == (SEEDS / "vector_search.py").read_text() else "S2"


def outcome(job: EvalJob, static_ids: list[str], scores_of: dict, violation: RuntimeViolation | None = None,
            ) -> EvalOutcome:
    static, other = scores_of[name_of(job.source)]
    scores = [0.0 if violation else static[static_ids.index(q.id)] if q.id in static_ids else other for q in job.items]
    results = [ItemResult(id=q.id, category=q.category, question=q.question, expected=q.answer, prediction="x",
                          score=score) for q, score in zip(job.items, scores)]
    overall, categories = summarise(results)
    report = EvalReport(task="synthetic", backend="stand-in", embedder="hashing", texts_written=len(job.texts),
                        score=overall, categories=categories, results=results, calls={}, wall_seconds=0.0,
                        sandbox=SandboxInfo(layers=[], missing_layers={}, ready_seconds=None), violation=violation)
    return EvalOutcome(candidate_id=job.candidate_id, purpose=job.purpose, report=report,
                       static_score=static_score(report, job.static_ids), node_id="here", worker_pid=0)


def failing(work: Work, mode: str, static_ids: list[str], scores_of: dict) -> Done:
    """The evaluation's end in each way a program can fail one: as the real evaluator reports each."""
    job = work.payload
    match mode:
        case "raise":
            return Raised(work, ValueError("the program's answer() raised inside the host's checks"))
        case "crash":
            return Crashed(work, "ActorDiedError: the worker died")
        case "violation":
            violation = RuntimeViolation(phase="read", kind="exception", message="ZeroDivisionError: division by zero")
        case "timeout":
            violation = RuntimeViolation(phase="read", kind="timeout", message="read() took over 15 s")
        case "garbage frame":
            violation = RuntimeViolation(phase="read", kind="protocol", message="malformed 'answer' frame: not JSON")
    return Finished(work, outcome(job, static_ids, scores_of, violation))


class InjectingPool:
    """Workers that answer at once, oldest first, except that the programs in ``fail`` (by name, to a purpose)
    fail that evaluation in the way named, every time it is handed out."""

    def __init__(self, static_ids: list[str], fail: dict[tuple[str, str], str], scores_of: dict):
        self.static_ids, self.scores_of = static_ids, scores_of
        self.fail = fail
        self.running: list[Work] = []
        self.handed: list[tuple[str, str]] = []  # (program name, purpose) of every evaluation handed out

    def idle(self, kind: str) -> int:
        return 1 - sum(1 for work in self.running if work.kind == kind)

    def busy(self) -> bool:
        return bool(self.running)

    def submit(self, work: Work) -> None:
        assert self.idle(work.kind) > 0, "more work handed out than there are idle workers"
        self.running.append(work)
        if work.kind == "evaluate":
            self.handed.append((name_of(work.payload.source), work.payload.purpose))

    def next_finished(self, timeout_s: float) -> list[Done]:
        work = self.running.pop(0)
        if work.kind == "reflect":
            return [Finished(work, reflect(work.payload))]
        mode = self.fail.get((name_of(work.payload.source), work.payload.purpose))
        if mode:
            return [failing(work, mode, self.static_ids, self.scores_of)]
        return [Finished(work, outcome(work.payload, self.static_ids, self.scores_of))]


def run_to_the_end(tmp_path: Path, fail: dict[tuple[str, str], str], scenario: str = "confirmed", pool_class=InjectingPool,
                   ) -> tuple[Ending, SearchPolicy, InjectingPool, dict[str, str]]:
    config = RunConfig.model_validate({
        "task": {"name": "synthetic", "seed": 1},
        "split": {"static_size": 6, "rotating_size": 2, "train_ratio": 2.0, "confirmation_size": 4},
        "search": {"max_candidates": 2, "reflections_in_flight": 1, "evaluations_in_flight": 1,
                   "reflector": "offline"},
        "llm": {"embedding": {"kind": "hashing"}},
    })
    task = make_synthetic(seed=1)
    plan = SplitPlan(task, HashingEmbedder(), test_fraction=config.split.test_fraction, static_size=6,
                     rotating_size=2, train_ratio=2.0, seed=0, confirmation_size=4)
    run_dir = RunDir(tmp_path / "run")
    run_dir.write_split(plan.split)
    recorder = RunRecorder(run_dir, Progress(io.StringIO()), ProgressState())
    policy = SearchPolicy(config, task, plan, recorder, evaluators=1, llm_spent=lambda: None)
    seeds = [Seed(name, (SEEDS / f"{name}.py").read_text()).candidate() for name in ("vector_search", "experience_learner")]
    pool = pool_class(plan.split.static, fail, SCENARIOS[scenario])
    policy.start(seeds)
    policy.drive(pool)
    ending = Endgame(policy, recorder, test_texts=[t.id for t in task.texts]).run(pool)
    ids = {name_of(m.source): m.id for m in policy.state.members}
    run_dir.close()
    return ending, policy, pool, ids


@pytest.fixture(scope="module")
def positions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Who holds each position in each scenario when nothing fails (and the fallback: the program chosen when the
    chosen one fails its test), checked to be what the scores make."""
    found = {}
    for scenario in SCENARIOS:
        ending, policy, _, ids = run_to_the_end(tmp_path_factory.mktemp(scenario), {}, scenario)
        names = {i: name for name, i in ids.items()}
        contender = policy.incumbent.contender()
        assert contender.verdict == "contender" and ending.selection.rule == "confirmation" and not ending.failures
        held = {"incumbent": names[policy.incumbent.best.id], "contender": names[contender.challenger],
                "seed": names[ending.best_seed.id], "chosen": names[ending.best.id]}
        assert set(ending.tests) == {ids[held["chosen"]], ids[held["seed"]]}
        fallen, _, _, _ = run_to_the_end(tmp_path_factory.mktemp(scenario), {(held["chosen"], "test"): "violation"},
                                         scenario)
        assert f"{ids[held['chosen']]} was passed over" in fallen.selection.how
        found[scenario] = {**held, "fallback": names[fallen.best.id]}
    assert found["confirmed"] == {"incumbent": "R", "contender": "C", "seed": "S1", "chosen": "C", "fallback": "R"}
    assert found["kept"]["chosen"] == "R" and found["seed"]["incumbent"] == "S1"
    return found


@pytest.mark.parametrize("phase, mode, role", list(itertools.product(PHASES, MODES, ROLES)))
def test_a_program_failing_in_any_phase_way_and_position_never_ends_the_run(
        tmp_path: Path, positions: dict[str, dict[str, str]], phase: str, mode: str, role: str):
    scenario = SCENARIO_FOR.get((phase, role), "confirmed")
    held = positions[scenario]
    target, purpose = held[role], PHASES[phase]
    fail = {(target, purpose): mode}
    if role == "fallback":  # it is in the fallback's place only once the chosen program failed its test
        fail[(held["chosen"], "test")] = "violation"
    ending, policy, pool, ids = run_to_the_end(tmp_path, fail, scenario)
    names = {i: name for name, i in ids.items()}

    took_part = (target, purpose) in pool.handed
    assert took_part, f"{target} never had a {purpose} evaluation: the table's position is not reached"
    if mode == "crash":  # the policy's cap, in the search and at the end alike
        assert pool.handed.count((target, purpose)) == MAX_CRASHES_PER_CANDIDATE

    # The run ends with a program that passed its test, and the failing one is not it.
    assert names.get(ending.best.id) != target
    best_test = ending.tests[ending.best.id]
    assert best_test.report.violation is None and ending.best.id not in ending.failures
    if phase == "static":
        assert target not in ids  # recorded as failed or violated: never a member, never chosen
        rows = table(tmp_path / "run", "candidates")
        assert [r["status"] for r in rows if r["status"] not in ("evaluated", "queued")] == \
            ["failed" if mode in ("raise", "crash") else "violation"]
    else:
        failed_id = next(m.id for m in policy.state.members if name_of(m.source) == target)
        assert failed_id in ending.failures  # why its confirmation or test has no result (the summary's field)
        # A program that could have been chosen is named in the selection as passed over.
        if phase == "confirmation" or target == held["chosen"] or role == "fallback":
            assert f"{failed_id} was passed over" in ending.selection.how
        rows = table(tmp_path / "run", "events" if mode in ("raise", "crash") else "results")
        if mode in ("raise", "crash"):  # no result: a failed event says why
            assert any(e["kind"] == "failed" and e["candidate"] == failed_id and e["purpose"] == purpose for e in rows)
        else:  # a result that broke the contract: logged as its results, zeroed
            assert any(r["candidate"] == failed_id for r in rows)


def test_an_infrastructure_error_at_the_end_still_stops_the_run(tmp_path: Path):
    class Broken(InjectingPool):
        def next_finished(self, timeout_s: float) -> list[Done]:
            work = self.running[0]
            if work.kind == "evaluate" and work.payload.purpose == "test":
                self.running.pop(0)
                return [Raised(work, InfrastructureError("the endpoint is gone after its retries"))]
            return super().next_finished(timeout_s)

    with pytest.raises(FatalRunError, match="endpoint is gone"):
        run_to_the_end(tmp_path, {}, pool_class=Broken)
