"""The questions that score a program (static, confirmation, test) never reach a reflector through what the
program itself produced. A hostile program (``tests/hostile/question_leak.py``) remembers every question it is
asked and raises an exception listing them; really evaluated in the sandbox, its errors do hold the questions.
Two routes are closed: the runtime-fix request states a violation in the host's words (``search.fix_report``),
and a search evaluation reads its rotating questions (the only ones whose cases a reflector is shown) before any
static one, so what it answers there was written before it saw a question that scores it.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.search_loop.policy import SearchPolicy
from mstar_ray.driver.progress import Progress, ProgressState
from mstar_ray.driver.recorder import RunRecorder
from mstar_ray.driver.run_dir import RunDir
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.reflect.request import sample_cases
from mstar_ray.results import EvalConcurrency, EvalReport, RuntimeViolation, SandboxInfo
from mstar_ray.run_config import RunConfig
from mstar_ray.search.fix_report import WITHHELD, fix_report
from mstar_ray.search.jobs import EvalJobs
from mstar_ray.search.split import SplitPlan
from mstar_ray.state.candidate import Candidate
from mstar_ray.state.transitions import Evaluated
from mstar_ray.tasks.model import Task
from mstar_ray.families.qa.synthetic import make_synthetic

ROOT = Path(__file__).resolve().parents[1]
LEAK = (ROOT / "tests" / "hostile" / "question_leak.py").read_text()


def plan_of(task: Task) -> SplitPlan:
    return SplitPlan(task, HashingEmbedder(), test_fraction=0.3, static_size=6, rotating_size=4, train_ratio=2.0,
                     seed=0, confirmation_size=4)


def scoring_questions(task: Task, plan: SplitPlan) -> list[str]:
    scoring = plan.split.scoring()
    return [q.question for q in task.items if q.id in scoring]


def holds_any(text: str, questions: list[str]) -> list[str]:
    return [q for q in questions if q in text]


def test_the_leaking_programs_errors_hold_the_questions_and_the_fix_report_holds_none(tmp_path: Path):
    task = make_synthetic(seed=1)
    plan = plan_of(task)
    job = EvalJobs(task, plan, judge_all=False, attribute=False).search("leak", LEAK, iteration=1)
    job_task = Task(name=task.name, family=task.family, texts=job.texts, items=job.items)
    static = [q.question for q in task.items if q.id in set(plan.split.static)]
    # Reads from forked readers (the default with a model) remember nothing of one another: no question reaches a
    # later read.
    forked = evaluate(LEAK, job_task, OfflineBackend(), HashingEmbedder(), feedback_ids=job.feedback_ids,
                      concurrency=EvalConcurrency(in_flight=1, episodes=1, readers=4))
    assert forked.sandbox.reads == "forked"
    assert not holds_any("\n".join(r.error or "" for r in forked.results), static)
    # Reads in the program's process, in item order (a program running threads, or evaluation.readers = 1) do.
    report = evaluate(LEAK, job_task, OfflineBackend(), HashingEmbedder(), feedback_ids=job.feedback_ids,
                      concurrency=EvalConcurrency(in_flight=1, episodes=1, readers=1))
    errors = "\n".join(r.error or "" for r in report.results)
    assert holds_any(errors, static), "the attack no longer gets the questions: this test proves nothing"

    # Route 1: the cases a reflector is shown (rotating questions only) were answered before any static read.
    hidden = plan.split.scoring()
    failures, success = sample_cases(report.results, random.Random(0), hidden=hidden)
    shown = "\n".join(c.model_dump_json() for c in [*failures, *([success] if success else [])])
    assert failures and not holds_any(shown, scoring_questions(task, plan))

    # Route 2: a violation raised with the questions in its message (and a traceback it could forge).
    message = next(r.error for r in report.results if r.error and holds_any(r.error, static)).split(": ", 1)[1]
    violation = RuntimeViolation(phase="read", kind="exception", message=message, traceback=(
        f'  File "program.py", line 30, in read\n    raise ValueError(...)\n'
        f'  File "program.py", line 9999, in {static[0].split()[0]}\n{message}\n'))
    text = fix_report(violation, LEAK)
    assert not holds_any(text, scoring_questions(task, plan))
    assert "[exception]" in text and "ValueError" in text and WITHHELD in text
    assert 'line 30, in read:\n    raise ValueError("asked: " + " || ".join(ASKED))' in text  # from the source


def test_what_the_fix_report_keeps_is_only_what_the_host_can_vouch_for():
    dynamic = RuntimeViolation(phase="read; what did Ana say", kind="exception",
                               message="Which_city_did_Ana_visit: boom",  # a class named at run time
                               traceback='  File "program.py", line 3, in Which_city_did_Ana_visit\n')
    text = fix_report(dynamic, "x = 1\ny = 2\nz = 3\n")
    assert "Ana" not in text and "during a call" in text and "line 3" not in text
    defined = RuntimeViolation(phase="write", kind="contract", message="StoreFull: too many items for 'Ana'",
                               traceback='  File "program.py", line 2, in write\n')
    text = fix_report(defined, "class StoreFull(Exception):\n    def write(self): raise StoreFull()\n")
    assert "(StoreFull)" in text and "Ana" not in text and "raise StoreFull()" in text


def test_a_runtime_fix_request_never_carries_the_programs_message(tmp_path: Path):
    config = RunConfig.model_validate({
        "task": {"name": "synthetic", "seed": 1},
        "split": {"static_size": 6, "rotating_size": 2, "train_ratio": 2.0},
        "search": {"max_candidates": 2, "reflector": "llm", "runtime_fix": True},
        # never called: the policy only builds the request
        "llm": {"reflector": {"base_url": "http://127.0.0.1:9/v1", "model": "unused", "timeout_s": 30},
                "embedding": {"kind": "hashing"}},
    })
    task = make_synthetic(seed=1)
    plan = plan_of(task)
    run_dir = RunDir(tmp_path / "run")
    policy = SearchPolicy(config, task, plan, RunRecorder(run_dir, Progress(io.StringIO()), ProgressState()),
                          evaluators=1, llm_spent=lambda: None)
    question = task.items[0].question
    child = Candidate(id="c1", source=LEAK, parent="p", origin="reflection", commit_message="", iteration=1)
    parent = Candidate(id="p", source=LEAK, parent=None, origin="seed", commit_message="", iteration=0)
    policy.state.apply(Evaluated(candidate=parent, score=0.5, results=[], write_example=None, tokens=0))
    report_violation = RuntimeViolation(phase="read", kind="exception", message=f"ValueError: asked: {question}",
                                        traceback=f"ValueError: asked: {question}")
    policy._maybe_fix(child, _report_with(report_violation))
    request = policy.fixes[0].payload
    assert request.kind == "runtime_fix" and question not in request.violation and WITHHELD in request.violation


def _report_with(violation: RuntimeViolation) -> EvalReport:
    return EvalReport(task="synthetic", backend="offline", embedder="hashing", texts_written=0, score=0.0,
                      categories={}, results=[], violation=violation,
                      sandbox=SandboxInfo(layers=[], missing_layers={}, ready_seconds=None), calls={}, wall_seconds=0.0)
