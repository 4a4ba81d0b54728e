"""The fixed task-agent protocol (docs/design.md section 3): evaluate one memory program on one task.

Write phase, the same for every task family: each raw text -> the backend extracts a ``KnowledgeItem`` ->
``kb.write`` in the sandbox (in task order: the knowledge base is stateful; the extractions run ahead, see
``mstar_ray.agent.concurrency``; items run at once too, their reads reaching the sandbox in item order). Then each item goes to its task's
family (``mstar_ray.families``), which runs it with the memory (``recall``: the backend fills a ``Query`` from
a text, ``kb.read`` answers it) and scores it: a question answered from the context and scored by token F1,
an episode played from what memory recalled at its start, a conversation answered and graded by a rubric.
For a program that defines ``feedback(query, score)``, the items named as its feedback slice (training items:
never the ones whose scores are its fitness or its test result) are run first, each followed by that call.
Last, if asked, each failure with known evidence is attributed to storage, retrieval or answering
(``mstar_ray.agent.attribution``). A contract violation at run time (timeout, LLM budget, oversized read,
forbidden operation, crash...) scores the program 0, as the paper does, and is reported with its reason so a
reflector can fix it.
"""

from __future__ import annotations

import collections
import concurrent.futures
import time
from collections.abc import Collection
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mstar_ray.agent.attribution import attribute as attribute_failures
from mstar_ray.agent.backend import AgentBackend
from mstar_ray.agent.concurrency import (
    NOTHING_AHEAD, Ahead, EvalConcurrency, SERIAL, TurnsStopped, Turns, as_done, executor, in_order,
)
from mstar_ray.contract import ProgramInfo, inspect_program
from mstar_ray.embedding.cached import CachedEmbedder, candidate_embedder
from mstar_ray.embedding.embedder import Embedder
from mstar_ray.families import family as family_of
from mstar_ray.families.base import Family, ItemRun, MemoryViolation, Recall
from mstar_ray.llm.candidate_cache import CandidateBudget
from mstar_ray.llm.errors import RequestRefused
from mstar_ray.llm.usage import usage_since
from mstar_ray.results import (
    EvalProgress,
    EvalReport,
    ItemResult,
    ProgressHook,
    RuntimeViolation,
    SandboxInfo,
    stage_counts,
    summarise,
)
from mstar_ray.sandbox_host.outcome import Outcome
from mstar_ray.sandbox_host.process import Sandbox
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from mstar_ray.tasks.model import Item, Task
from mstar_ray.tasks.model import RawText

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
    """``recall`` for the families: the backend builds the program's Query from a text, the sandbox reads.
    An oracle read is counted, and its requests named, apart (``oracle_query``, ``oracle_toolkit``).

    A query depends on the text and the program's declarations, never on what memory holds: the items'
    queries are built while the writes run (``build_ahead``), in the slots the extractions leave free, and a
    recall takes its text's query from there. Once the sandbox serves reads from its post-write snapshot
    (``Sandbox.snapshot``), each read runs in a reader of its own, as many at once as it allows; otherwise
    reads reach the program's process one at a time, in item order (``for_item``: item *i*'s read waits for
    turn *i*), so the program sees what the serial protocol shows it."""

    def __init__(self, sandbox: Sandbox, backend: AgentBackend, instruction: str, program: ProgramInfo,
                 calls: collections.Counter[str], turns: Turns | None = None, turn: int = 0,
                 root: _SandboxMemory | None = None):
        self.sandbox, self.backend, self.instruction, self.calls = sandbox, backend, instruction, calls
        self.program, self.fields = program, program.schema.query
        self.turns, self.turn, self.root = turns, turn, root or self
        self.toolkit_step = "toolkit"  # what the program's own LLM calls are named in the accounts, right now
        self.ahead: Ahead[str, dict[str, Any]] = NOTHING_AHEAD

    def build_ahead(self, pool: concurrent.futures.Executor, texts: list[str]) -> None:
        """Start building the queries of ``texts`` in ``pool``'s free slots (none with one slot: the serial
        protocol builds each at its read)."""
        self.ahead = Ahead(pool, self._query, texts)

    def _query(self, text: str, oracle: bool = False) -> dict[str, Any]:
        return self.backend.build_query(self.instruction, self.fields, text, step="oracle_query" if oracle else "query")

    def for_item(self, turns: Turns, turn: int, calls: collections.Counter[str]) -> _SandboxMemory:
        """A view for one concurrent item: its own counts, its read at ``turn`` of ``turns``."""
        return _SandboxMemory(self.sandbox, self.backend, self.instruction, self.program, calls, turns, turn, self)

    def toolkit(self, messages: list[dict[str, str]], budget: CandidateBudget) -> str:
        return self.backend.toolkit_completion(messages, step=self.toolkit_step, budget=budget)

    def recall(self, text: str, *, oracle: bool = False) -> Recall:
        root = self.root
        built = None if oracle else root.ahead.claim(text)
        query = built.result() if built is not None else self._query(text, oracle)
        self.calls["oracle_read" if oracle else "query"] += 1
        waits_its_turn = None if self.sandbox.reads_forked else self.turns
        if waits_its_turn is not None:
            waits_its_turn.wait(self.turn)
        try:
            root.toolkit_step = "oracle_toolkit" if oracle else "toolkit"
            try:
                outcome = self.sandbox.read(query)
            finally:
                root.toolkit_step = "toolkit"
            if outcome.violation and self.turns is not None:
                self.turns.stop()  # before the turn passes: no later item reads a killed program
        finally:
            if self.turns is not None:
                self.turns.done(self.turn)
        self.calls["toolkit_llm"] += outcome.llm_calls
        if outcome.violation:
            raise MemoryViolation(outcome, query)
        if not outcome.ok:
            return Recall(query, "", outcome.seconds, outcome.describe())
        return Recall(query, outcome.value, outcome.seconds)


def _violation(phase: str, outcome: Outcome) -> RuntimeViolation:
    return RuntimeViolation(phase=phase, kind=outcome.kind or "error", message=outcome.message, traceback=outcome.traceback)


class _Evaluation:
    """One evaluation's state through its phases; ``evaluate`` below is the procedure."""

    def __init__(self, info: ProgramInfo, task: Task, items: list[Item], backend: AgentBackend, family: Family,
                 judge: LLMClient | None, verdicts: bool, feedback: set[str], progress: ProgressHook,
                 concurrency: EvalConcurrency):
        self.info, self.task, self.items, self.backend, self.family = info, task, items, backend, family
        self.concurrency = concurrency
        self.judge, self.verdicts, self.feedback, self.progress = judge, verdicts, feedback, progress
        self.results = [ItemResult.of(item) for item in items]
        self.calls: collections.Counter[str] = collections.Counter(
            {step: 0 for step in ("extract", "query", *family.steps, "toolkit_llm", "feedback")})
        self.state = EvalProgress(texts_total=len(task.texts), items_total=len(items))
        self.violation: RuntimeViolation | None = None
        self.write_errors: list[str] = []
        self.write_example: dict[str, Any] | None = None
        self.written = 0
        self.attribution_stopped: str | None = None

    def write_phase(self, sandbox: Sandbox, pool: concurrent.futures.Executor, memory: _SandboxMemory) -> None:
        """Extractions run ahead (every one is queued, ``in_flight`` run at once, and those not started when the
        evaluation stops never start); each write reaches the sandbox, in task order, as soon as its own
        extraction is back and the write before it is done. The items' queries are queued after every
        extraction, so a free slot takes an extraction first."""
        constants, schema = self.info.constants, self.info.schema
        texts = self.task.texts
        started = time.monotonic()

        def extract(text: RawText) -> dict[str, Any]:
            return self.backend.extract_item(constants["INSTRUCTION_KNOWLEDGE_ITEM"], schema.knowledge_item, text.text)

        extracted = in_order(pool, extract, texts, len(texts) if self.concurrency.in_flight > 1 else 1)
        if self.concurrency.queries_ahead:
            memory.build_ahead(pool, [self.items[i].question for order in self.item_order() for i in order])
        for text, item in zip(texts, extracted):
            self.calls["extract"] += 1
            outcome = sandbox.write(item, text.text)
            self.calls["toolkit_llm"] += outcome.llm_calls
            if outcome.violation:
                self.violation = _violation("write", outcome)
                return
            if outcome.ok:
                self.written += 1
                if self.write_example is None:
                    self.write_example = {"raw_text": text.text[:WRITE_EXAMPLE_CHARS], "item": item}
            else:
                self.write_errors.append(f"{text.id}: {outcome.describe()}")
            self.state.texts_done += 1
            self.state.write_s = time.monotonic() - started
            self.progress(self.state)

    def _item_run(self, item: Item, memory: _SandboxMemory) -> ItemRun:
        return ItemRun(agent=self.backend, memory=memory, response_instruction=self.info.constants["INSTRUCTION_RESPONSE"],
                       always_on=self.info.constants["ALWAYS_ON_KNOWLEDGE"], judge=self.judge,
                       verdicts=self.verdicts and item.id not in self.feedback, calls=memory.calls)

    def _item_done(self, started: float) -> None:
        self.state.items_done += 1
        self.state.read_s = time.monotonic() - started
        self.progress(self.state)

    def item_order(self) -> tuple[list[int], list[int]]:
        """The feedback slice first, one item after another (what each teaches serves the next), then the rest."""
        taught = [i for i, item in enumerate(self.items) if item.id in self.feedback]
        return taught, [i for i, item in enumerate(self.items) if item.id not in self.feedback]

    def item_phase(self, sandbox: Sandbox, memory: _SandboxMemory, pool: concurrent.futures.Executor) -> None:
        taught, rest = self.item_order()
        started = time.monotonic()
        for index in taught:
            item = self.items[index]
            try:
                result = self.results[index] = self.family.run(item, self._item_run(item, memory))
            except MemoryViolation as exc:
                self.results[index].query, self.results[index].seconds = exc.query, exc.outcome.seconds
                self.violation = _violation("read", exc.outcome)
                return
            if result.error is None and result.query is not None:  # no read, nothing to teach
                outcome = sandbox.feedback(result.query, result.score)
                self.calls["feedback"] += 1
                self.calls["toolkit_llm"] += outcome.llm_calls
                if outcome.violation:
                    self.violation = _violation("feedback", outcome)
                    return
                if not outcome.ok:
                    result.error = f"feedback: {outcome.describe()}"
            self._item_done(started)
        self._concurrent_items(rest, sandbox, memory, started, pool)

    def _concurrent_items(self, order: list[int], sandbox: Sandbox, memory: _SandboxMemory, started: float,
                          pool: concurrent.futures.Executor) -> None:
        """Items independent given the memory run at once: their model steps overlap, their reads reach the
        sandbox in item order (``Turns``). A violation stops every read after it and every item not started;
        what the serial protocol would not have run (the items after it) is left as it would have left it."""
        sandbox.snapshot()  # the state every read sees from here on, where the program's process can be forked
        overlap = self.family.overlap  # what of an item may run while other items run: the family says
        slots = self.concurrency.in_flight if overlap.across_items else 1
        if overlap.helper_process:
            slots = min(slots, self.concurrency.episodes)
        turns = Turns()
        counts: dict[int, collections.Counter[str]] = {index: collections.Counter() for index in order}  # each item's own: merged below, in item order

        def run_item(turn_index: tuple[int, int]) -> ItemResult:
            turn, index = turn_index
            item = self.items[index]
            try:
                return self.family.run(item, self._item_run(item, memory.for_item(turns, turn, counts[index])))
            except (MemoryViolation, TurnsStopped):
                raise
            except BaseException:
                turns.stop()  # a failed step (an endpoint, the budget) ends the evaluation, as it always did
                raise
            finally:
                turns.done(turn)

        finished: dict[int, ItemResult] = {}
        failure: BaseException | None = None
        violated: tuple[int, MemoryViolation] | None = None
        for (turn, index), future in as_done(pool, run_item, list(enumerate(order)), slots, lambda: not turns.stopped):
            try:
                finished[turn] = future.result()
            except TurnsStopped:
                continue  # after a violation: where the serial protocol would not have gone
            except MemoryViolation as exc:
                violated = violated or (turn, exc)
                continue
            except BaseException as exc:  # noqa: BLE001 - raised below, once the items in flight are back
                failure = failure or exc
                continue
            self._item_done(started)
        if failure is not None:
            raise failure
        # What the serial protocol would have: every item before the violation, the violating one's query.
        last = violated[0] if violated is not None else len(order)
        for turn, index in enumerate(order[:last + 1]):
            if turn in finished and turn < last:
                self.results[index] = finished[turn]
            if turn <= last:
                self.calls.update(counts[index])
        if violated is not None:
            turn, violation = violated
            index = order[turn]
            self.results[index].query, self.results[index].seconds = violation.query, violation.outcome.seconds
            self.violation = _violation("read", violation.outcome)

    def attribution_phase(self, memory: _SandboxMemory) -> None:
        self.calls["oracle_read"] += 0  # reported even when no failure needed one
        self.attribution_stopped = attribute_failures(self.results, self.items, self.task.evidence(), memory)

    def zero_on_violation(self) -> None:
        # The contract: a runtime violation scores the whole program zero.
        if self.violation is not None:
            for result in self.results:
                result.score = 0.0
                result.judge = 0.0 if self.judge is not None and self.verdicts else None
                result.stage, result.missing = None, []


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
    attribute: bool = False,
    concurrency: EvalConcurrency | None = None,
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
    ``attribute``: attribute each failure with known evidence to a stage (``mstar_ray.agent.attribution``),
    with one oracle read per failure whose evidence was written but is missing; scores do not change.
    ``concurrency``: how many of its model steps overlap (``mstar_ray.agent.concurrency``); the sandbox sees the
    same calls in the same order whatever it is. None: the run's default for a backend that waits on a model,
    the serial protocol for one that computes (the offline backend: threads would only share its CPU).
    Raises ``ContractError`` when the program fails the static checks: it is never started then.
    """
    info = inspect_program(source)
    family = family_of(task.family)
    started = time.monotonic()
    llm_before = backend.usage()
    judge_before = judge.usage() if judge else {}
    embedding_before = embedder.usage() if isinstance(embedder, CachedEmbedder) else None
    # The program's own toolkit calls stay in its part of the run's cache: nothing there says what another
    # candidate or the host asked, by content or by timing, and it adds at most toolkit_cache_mb.
    budget = CandidateBudget.of_program(source, (limits or SandboxLimits()).toolkit_cache_mb)
    embed = _CountingEmbedder(candidate_embedder(embedder, budget))
    run = _Evaluation(info, task, list(task.items if items is None else items), backend, family, judge, verdicts,
                      set(feedback_ids) if info.has_feedback else set(), progress or (lambda _: None),
                      concurrency or (EvalConcurrency() if backend.waits else SERIAL))
    memory: _SandboxMemory | None = None

    def toolkit(messages: list[dict[str, str]]) -> str:
        assert memory is not None  # set before the program is started, so before it can call the toolkit
        return memory.toolkit(messages, budget)

    with Sandbox(source, limits=limits, llm=toolkit, embed=embed,
                 readers=run.concurrency.readers) as sandbox, executor(run.concurrency.in_flight, "steps") as pool:
        memory = _SandboxMemory(sandbox, backend, info.constants["INSTRUCTION_QUERY"], info, run.calls)
        outcome = sandbox.start()
        if not outcome.ok:
            run.violation = _violation("load", outcome)
        run.progress(run.state)
        phase: Callable[[], None]
        for name, phase in (("write", lambda: run.write_phase(sandbox, pool, memory)),
                            ("read", lambda: run.item_phase(sandbox, memory, pool)),
                            *([("attribution", lambda: run.attribution_phase(memory))] if attribute else [])):
            if run.violation is None:
                try:
                    phase()
                except RequestRefused as refused:
                    if not refused.by_content:
                        raise  # the endpoint's configuration: the infrastructure's
                    run.violation = RuntimeViolation(phase=name, kind="prompt_refused", message=(
                        "the endpoint refused a task-agent prompt, which holds the program's declarations "
                        f"(instructions, field descriptions, ALWAYS_ON_KNOWLEDGE) and what read() returned: {refused}"
                    )[:2000])
        sandbox_info = SandboxInfo(
            layers=sandbox.layers, missing_layers=sandbox.missing_layers, ready_seconds=sandbox.ready_seconds,
            reads="forked" if sandbox.reads_forked else sandbox.serial_reason, readers_forked=sandbox.readers_forked,
            readers_peak=sandbox.readers_peak, rss_peak_kb=sandbox.rss_peak_kb,
        )
    run.state.finished = True
    run.progress(run.state)
    run.zero_on_violation()
    results = run.results
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
        texts_written=run.written,
        score=score,
        categories=categories,
        results=results,
        violation=run.violation,
        write_example=run.write_example,
        write_errors=len(run.write_errors),
        write_error_examples=run.write_errors[:MAX_RECORDED_WRITE_ERRORS],
        judge_score=sum(judged) / len(judged) if judged else None,
        judged=len(judged),
        calls={**run.calls, "embedded_texts": embed.texts},
        llm=llm_usage,
        embedding=embedder.usage().minus(embedding_before) if isinstance(embedder, CachedEmbedder) and embedding_before is not None else None,
        wall_seconds=time.monotonic() - started,
        sandbox=sandbox_info,
        stages=stage_counts(results) if attribute else None,
        attribution_stopped=run.attribution_stopped,
    )
