"""The fixed task-agent protocol (SPEC section 3): evaluate one memory program on one task.

Write phase, the same for every task family: each raw text -> the backend extracts a ``KnowledgeItem`` ->
``kb.write`` in the sandbox (serially: the knowledge base is stateful). Then each item goes to its task's
family (``mstar_ray.families``), which runs it with the memory (``recall``: the backend fills a ``Query`` from
a text, ``kb.read`` answers it) and scores it: a question answered from the context and scored by token F1,
an episode played from what memory recalled at its start, a conversation answered and graded by a rubric.
For a program that defines ``feedback(query, score)``, the items named as its feedback slice (training items:
never the ones whose scores are its fitness or its test result) are run first, each followed by that call.
A contract violation at run time (timeout, LLM budget, oversized read, forbidden operation, crash...) scores
the program 0, as the paper does, and is reported with its reason so a reflector can fix it.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from mstar_ray.agent.backend import AgentBackend
from mstar_ray.contract import inspect_program
from mstar_ray.embedding.cached import CachedEmbedder
from mstar_ray.embedding.embedder import Embedder
from mstar_ray.families import family as family_of
from mstar_ray.families.base import ItemRun, MemoryViolation, Recall
from mstar_ray.llm.usage import usage_since
from mstar_ray.program_schema import FieldSpec
from mstar_ray.results import (
    EvalProgress,
    EvalReport,
    ItemResult,
    ProgressHook,
    RuntimeViolation,
    SandboxInfo,
    summarise,
)
from mstar_ray.sandbox_host import Outcome, Sandbox, SandboxLimits
from mstar_ray.tasks.model import Item, Task

if TYPE_CHECKING:
    from mstar_ray.llm.client import LLMClient

MAX_RECORDED_WRITE_ERRORS = 5
WRITE_EXAMPLE_CHARS = 600


class _CountingEmbedder:
    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self.texts = 0

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        return self.embedder.embed(texts)


class _SandboxMemory:
    """``recall`` for the families: the backend builds the program's Query from a text, the sandbox reads."""

    def __init__(self, sandbox: Sandbox, backend: AgentBackend, instruction: str, fields: list[FieldSpec],
                 calls: collections.Counter[str]):
        self.sandbox, self.backend, self.instruction, self.fields, self.calls = sandbox, backend, instruction, fields, calls

    def recall(self, text: str) -> Recall:
        query = self.backend.build_query(self.instruction, self.fields, text)
        self.calls["query"] += 1
        outcome = self.sandbox.read(query)
        self.calls["toolkit_llm"] += outcome.llm_calls
        if outcome.violation:
            raise MemoryViolation(outcome, query)
        if not outcome.ok:
            return Recall(query, "", outcome.seconds, outcome.describe())
        return Recall(query, outcome.value, outcome.seconds)


def evaluate(
    source: str,
    task: Task,
    backend: AgentBackend,
    embedder: Embedder,
    *,
    limits: SandboxLimits | None = None,
    items: list[Item] | None = None,
    judge: LLMClient | None = None,
    verdicts: bool = True,
    progress: ProgressHook | None = None,
    feedback_ids: Collection[str] = (),
) -> EvalReport:
    """Run the protocol for ``source`` on ``task`` (or on a subset of its ``items``).

    ``judge``: the run's judge model; a family whose metric needs one (a rubric) always uses it, the others add
    its verdict only when ``verdicts`` is set (question answering's second metric).
    ``progress``, if given, is called with the same :class:`EvalProgress` after the program loads, after
    every write and every item, and once at the end (``finished``); it must be quick and must not
    keep the object past the call without copying it.
    ``feedback_ids``: items run first and followed by ``kb.feedback(query, score)``, if the program
    defines it (otherwise ignored: nothing changes for programs without feedback). They are reported like the
    others but never judged.
    Raises ``ContractError`` when the program fails the static checks: it is never started then.
    """
    info = inspect_program(source)
    constants = info.constants
    family = family_of(task.family)
    items = list(task.items if items is None else items)
    results = [ItemResult.of(item) for item in items]
    started = time.monotonic()
    llm_before = backend.usage()
    judge_before = judge.usage() if judge else {}
    embedding_before = embedder.usage() if isinstance(embedder, CachedEmbedder) else None
    embed = _CountingEmbedder(embedder)
    calls: collections.Counter[str] = collections.Counter(
        {step: 0 for step in ("extract", "query", *family.steps, "toolkit_llm", "feedback")})
    feedback = set(feedback_ids) if info.has_feedback else set()
    # The feedback slice first (a stable sort: each part keeps its order), so what it teaches serves the rest.
    order = sorted(range(len(items)), key=lambda i: items[i].id not in feedback)
    violation: RuntimeViolation | None = None
    write_errors: list[str] = []
    write_example: dict[str, Any] | None = None
    written = 0
    state = EvalProgress(texts_total=len(task.texts), items_total=len(items))
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
        memory = _SandboxMemory(sandbox, backend, constants["INSTRUCTION_QUERY"], info.schema.query, calls)
        phase_start = time.monotonic()
        for index in order if violation is None else []:
            item = items[index]
            run = ItemRun(agent=backend, memory=memory, response_instruction=constants["INSTRUCTION_RESPONSE"],
                          always_on=constants["ALWAYS_ON_KNOWLEDGE"], judge=judge,
                          verdicts=verdicts and item.id not in feedback, calls=calls)
            try:
                result = results[index] = family.run(item, run)
            except MemoryViolation as exc:
                results[index].query, results[index].seconds = exc.query, exc.outcome.seconds
                violation = fatal("read", exc.outcome)
                break
            if item.id in feedback and result.error is None:
                outcome = sandbox.feedback(result.query, result.score)
                calls["feedback"] += 1
                calls["toolkit_llm"] += outcome.llm_calls
                if outcome.violation:
                    violation = fatal("feedback", outcome)
                    break
                if not outcome.ok:
                    result.error = f"feedback: {outcome.describe()}"
            state.items_done += 1
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
            result.judge = 0.0 if judge is not None and verdicts else None
    score, categories = summarise(results)
    judged = [r.judge for r in results if r.judge is not None]
    llm_usage = usage_since(backend.usage(), llm_before)
    if judge is not None:
        llm_usage.update(usage_since(judge.usage(), judge_before))
    return EvalReport(
        task=task.name,
        family=family.name,
        metric=family.metric_for(judge is not None),
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
        judge_score=sum(judged) / len(judged) if judged else None,
        judged=len(judged),
        calls={**calls, "embedded_texts": embed.texts},
        llm=llm_usage,
        embedding=embedder.usage().minus(embedding_before) if embedding_before is not None else None,
        wall_seconds=time.monotonic() - started,
        sandbox=sandbox_info,
    )
