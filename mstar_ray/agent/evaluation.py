"""The fixed task-agent protocol (SPEC section 3): evaluate one memory program on one task.

Write phase: each raw text -> the backend extracts a ``KnowledgeItem`` -> ``kb.write`` in the sandbox
(serially: the knowledge base is stateful). Read phase: each question -> ``Query`` -> ``kb.read`` ->
the backend answers from the context -> token F1 against the gold answer. For a program that defines
``feedback(query, score)``, the questions named as its feedback slice (training questions: never the ones
whose scores are its fitness or its test result) are answered first, each followed by that call. A contract
violation at run time (timeout, LLM budget, oversized read, forbidden operation, crash...) scores the program
0, as the paper does, and is reported with its reason so a reflector can fix it.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from mstar_ray.agent.backend import AgentBackend
from mstar_ray.contract import inspect_program
from mstar_ray.embedding.cached import CachedEmbedder
from mstar_ray.embedding.embedder import Embedder
from mstar_ray.llm.usage import usage_since
from mstar_ray.results import (
    EvalProgress,
    EvalReport,
    ProgressHook,
    QuestionResult,
    RuntimeViolation,
    SandboxInfo,
    summarise,
)
from mstar_ray.sandbox_host import Outcome, Sandbox, SandboxLimits
from mstar_ray.tasks.judge import Judge
from mstar_ray.tasks.model import Question, Task
from mstar_ray.tasks.scoring import token_f1

MAX_RECORDED_WRITE_ERRORS = 5
WRITE_EXAMPLE_CHARS = 600


class _CountingEmbedder:
    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self.texts = 0

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        return self.embedder.embed(texts)


def evaluate(
    source: str,
    task: Task,
    backend: AgentBackend,
    embedder: Embedder,
    *,
    limits: SandboxLimits | None = None,
    questions: list[Question] | None = None,
    judge: Judge | None = None,
    progress: ProgressHook | None = None,
    feedback_ids: Collection[str] = (),
) -> EvalReport:
    """Run the protocol for ``source`` on ``task`` (or on a subset of its ``questions``).

    ``progress``, if given, is called with the same :class:`EvalProgress` after the program loads, after
    every write and every question, and once at the end (``finished``); it must be quick and must not
    keep the object past the call without copying it.
    ``feedback_ids``: questions answered first and followed by ``kb.feedback(query, score)``, if the program
    defines it (otherwise ignored: nothing changes for programs without feedback). They are reported like the
    others but never judged.
    Raises ``ContractError`` when the program fails the static checks: it is never started then.
    """
    info = inspect_program(source)
    constants = info.constants
    questions = list(task.questions if questions is None else questions)
    results = [
        QuestionResult(id=q.id, category=q.category, question=q.question, expected=q.answer) for q in questions
    ]
    started = time.monotonic()
    llm_before = backend.usage()
    judge_before = judge.client.usage() if judge else {}
    embedding_before = embedder.usage() if isinstance(embedder, CachedEmbedder) else None
    embed = _CountingEmbedder(embedder)
    calls = {"extract": 0, "query": 0, "answer": 0, "toolkit_llm": 0, "feedback": 0}
    feedback = set(feedback_ids) if info.has_feedback else set()
    # The feedback slice first (a stable sort: each part keeps its order), so what it teaches serves the rest.
    order = sorted(range(len(questions)), key=lambda i: questions[i].id not in feedback)
    violation: RuntimeViolation | None = None
    write_errors: list[str] = []
    write_example: dict[str, Any] | None = None
    written = 0
    state = EvalProgress(texts_total=len(task.texts), questions_total=len(questions))
    report_progress = progress or (lambda _: None)

    def fatal(phase: str, outcome: Outcome) -> RuntimeViolation:
        return RuntimeViolation(phase=phase, kind=outcome.kind or "error", message=outcome.message, traceback=outcome.traceback)

    with Sandbox(source, limits=limits, llm=backend.toolkit_completion, embed=embed) as sandbox:
        outcome = sandbox.start()
        if not outcome.ok:
            violation = fatal("load", outcome)
        report_progress(state)
        phase_start = time.monotonic()
        for text in task.texts if violation is None else []:
            item = backend.extract_item(constants["INSTRUCTION_KNOWLEDGE_ITEM"], info.schema.knowledge_item, text.text)
            calls["extract"] += 1
            outcome = sandbox.write(item, text.text)
            calls["toolkit_llm"] += outcome.llm_calls
            if outcome.violation:
                violation = fatal("write", outcome)
                break
            if outcome.ok:
                written += 1
                if write_example is None:
                    write_example = {"raw_text": text.text[:WRITE_EXAMPLE_CHARS], "item": item}
            else:
                write_errors.append(f"{text.id}: {outcome.describe()}")
            state.texts_done += 1
            state.write_s = time.monotonic() - phase_start
            report_progress(state)
        phase_start = time.monotonic()
        for result, question in ((results[i], questions[i]) for i in order) if violation is None else []:
            query = backend.build_query(constants["INSTRUCTION_QUERY"], info.schema.query, question.question)
            calls["query"] += 1
            outcome = sandbox.read(query)
            calls["toolkit_llm"] += outcome.llm_calls
            result.query, result.seconds = query, outcome.seconds
            if outcome.violation:
                violation = fatal("read", outcome)
                break
            if not outcome.ok:
                result.error = outcome.describe()
            else:
                result.context = outcome.value
                calls["answer"] += 1
                result.prediction = backend.answer(
                    constants["INSTRUCTION_RESPONSE"], constants["ALWAYS_ON_KNOWLEDGE"], result.context,
                    question.question,
                )
                result.score = token_f1(result.prediction, question.answer)
                if question.id in feedback:
                    outcome = sandbox.feedback(query, result.score)
                    calls["feedback"] += 1
                    calls["toolkit_llm"] += outcome.llm_calls
                    if outcome.violation:
                        violation = fatal("feedback", outcome)
                        break
                    if not outcome.ok:
                        result.error = f"feedback: {outcome.describe()}"
                elif judge is not None:
                    result.judge = judge(question.question, question.answer, result.prediction)
            state.questions_done += 1
            state.read_s = time.monotonic() - phase_start
            report_progress(state)
        sandbox_info = SandboxInfo(
            layers=sandbox.layers, missing_layers=sandbox.missing_layers, ready_seconds=sandbox.ready_seconds
        )

    state.finished = True
    report_progress(state)
    if violation is not None:
        # The contract: a runtime violation scores the whole program zero.
        for result in results:
            result.score = 0.0
            result.judge = 0.0 if judge is not None else None
    score, categories = summarise(results)
    verdicts = [r.judge for r in results if r.judge is not None]
    llm_usage = usage_since(backend.usage(), llm_before)
    if judge is not None:
        llm_usage.update(usage_since(judge.client.usage(), judge_before))
    return EvalReport(
        task=task.name,
        backend=backend.name,
        embedder=embedder.name,
        texts_written=written,
        score=score,
        categories=categories,
        results=results,
        violation=violation,
        write_example=write_example,
        write_errors=len(write_errors),
        write_error_examples=write_errors[:MAX_RECORDED_WRITE_ERRORS],
        judge_score=sum(verdicts) / len(verdicts) if verdicts else None,
        judged=len(verdicts),
        calls={**calls, "embedded_texts": embed.texts},
        llm=llm_usage,
        embedding=embedder.usage().minus(embedding_before) if embedding_before is not None else None,
        wall_seconds=time.monotonic() - started,
        sandbox=sandbox_info,
    )
