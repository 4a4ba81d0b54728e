"""An item's query is built while the writes run (``mstar_ray.agent.concurrency.Ahead``): a query depends on the
question and the program's declarations, never on what memory holds. The queries take only the slots the
extractions leave free, a step needed now never waits behind one started ahead, the steps in flight stay within
``evaluation.in_flight``, and the evaluation gives item for item what the serial protocol gives."""

from __future__ import annotations

import threading

from mstar_ray.agent.concurrency import SERIAL, Ahead, EvalConcurrency, executor
from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.families.task_registry import load_task
from tests.conftest import seed_source
from tests.test_eval_pipeline import comparable

HOLD_S = 60.0  # a safety net only: the held extraction is released by the event, not by this wait


class _Watched(OfflineBackend):
    """The offline agent as a model would be reached: its steps overlap. The last text's extraction is held until
    every question's query has been built (or ``HOLD_S`` passes), and the steps running at once are counted."""

    waits = True

    def __init__(self, last_text: str, questions: int):
        super().__init__()
        self.last_text, self.questions = last_text, questions
        self.built = 0
        self.all_built = threading.Event()
        self.held: bool | None = None  # whether the last extraction saw every query built before it returned
        self.extracted = 0
        self.extracted_at_first_query: int | None = None
        self.running = self.peak = 0
        self.started: list[str] = []  # each step as it starts: "extract" or "query"
        self._lock = threading.Lock()

    def _step(self, fn, *args, **kwargs):
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            return fn(*args, **kwargs)
        finally:
            with self._lock:
                self.running -= 1

    def extract_item(self, instruction, fields, raw_text):
        with self._lock:
            self.started.append("extract")
        item = self._step(self._held_extract, instruction, fields, raw_text)
        with self._lock:
            self.extracted += 1
        return item

    def _held_extract(self, instruction, fields, raw_text):
        # a step waiting on its model is in flight: the held extraction counts among the steps running at once,
        # so the queries built meanwhile overlap it however the threads are scheduled
        if raw_text == self.last_text:
            self.held = self.all_built.wait(HOLD_S)
        return super().extract_item(instruction, fields, raw_text)

    def build_query(self, instruction, fields, question, step="query"):
        with self._lock:
            self.started.append("query" if step == "query" else step)
            if self.extracted_at_first_query is None:
                self.extracted_at_first_query = self.extracted
        query = self._step(super().build_query, instruction, fields, question, step)
        with self._lock:
            self.built += step == "query"
            if self.built >= self.questions:
                self.all_built.set()
        return query


def _task():
    full = load_task("synthetic", seed=0)
    return full.model_copy(update={"items": full.items[:12]})


def test_every_query_is_built_before_the_writes_end_and_the_items_are_the_serial_protocols():
    task = _task()
    source = seed_source("vector_search")
    serial = evaluate(source, task, OfflineBackend(), HashingEmbedder(), concurrency=SERIAL)
    watched = _Watched(task.texts[-1].text, len(task.items))
    wide = evaluate(source, task, watched, HashingEmbedder(), concurrency=EvalConcurrency(in_flight=4, readers=1))
    assert watched.held is True  # built while the last text still waited on its extraction
    # every extraction started before any query: a slot takes the step needed now first
    assert watched.started[:len(task.texts)] == ["extract"] * len(task.texts)
    assert watched.built == len(task.items)  # each built once: every read took its query from there
    assert 1 < watched.peak <= 4
    assert comparable(wide) == comparable(serial)


def test_without_queries_ahead_each_query_is_built_after_the_writes():
    task = _task()
    watched = _Watched(task.texts[-1].text, len(task.items))
    watched.all_built.set()  # nothing is held
    report = evaluate(seed_source("vector_search"), task, watched, HashingEmbedder(),
                      concurrency=EvalConcurrency(in_flight=4, readers=1, queries_ahead=False))
    assert report.violation is None and watched.extracted_at_first_query == len(task.texts)


def test_the_serial_protocol_builds_each_query_at_its_read():
    task = _task()
    watched = _Watched(task.texts[-1].text, len(task.items))
    watched.all_built.set()  # nothing is held: serially, the queries come after every write
    report = evaluate(seed_source("vector_search"), task, watched, HashingEmbedder(), concurrency=SERIAL)
    assert report.violation is None and watched.peak == 1 and watched.built == len(task.items)


def test_a_step_needed_now_runs_before_every_step_started_ahead():
    order: list[str] = []
    gate = threading.Event()
    with executor(2, "test") as pool:
        blockers = [pool.submit(gate.wait) for _ in range(2)]  # both slots busy
        ahead = Ahead(pool, order.append, ["a1", "a2"])
        needed = [pool.submit(order.append, f"n{i}") for i in range(3)]
        gate.set()
        for future in (*blockers, *needed):
            future.result()
        for key in ("a1", "a2"):
            claimed = ahead.claim(key)
            if claimed is not None:
                claimed.result()
    assert order[:3] == ["n0", "n1", "n2"]


def test_a_claim_cancels_a_step_not_started_and_hands_over_one_started():
    started, release = threading.Event(), threading.Event()

    def step(key: str) -> str:
        if key == "slow":
            started.set()
            release.wait(HOLD_S)
        return key.upper()

    with executor(2, "test") as pool:
        busy = pool.submit(release.wait, HOLD_S)  # one slot busy: "slow" takes the other, "queued" waits
        ahead = Ahead(pool, step, ["slow", "queued", "slow"])
        assert started.wait(HOLD_S)
        assert ahead.claim("queued") is None  # cancelled: the caller builds it in the slot it holds
        running = ahead.claim("slow")
        assert running is not None
        release.set()
        assert running.result() == "SLOW" and busy.result() is True
        second = ahead.claim("slow")
        assert second is None or second.result() == "SLOW"
        assert ahead.claim("slow") is None and ahead.claim("never asked") is None


def test_one_slot_runs_nothing_ahead():
    calls: list[str] = []
    ahead = Ahead(executor(1, "test"), calls.append, ["a", "b"])
    assert ahead.claim("a") is None and calls == []


def test_a_pool_of_many_slots_starts_only_the_threads_its_steps_need():
    with executor(256, "lazy") as pool:
        for _ in range(3):
            pool.submit(lambda: None).result()  # one at a time: the thread that ran one runs the next
        started = [thread for thread in threading.enumerate() if thread.name.startswith("lazy-")]
    assert 1 <= len(started) <= 3
