"""One evaluation as a pipeline (``mstar_ray.agent.concurrency``): with its model steps overlapping, an evaluation
gives item for item what the serial protocol gives (scores, queries, contexts, predictions, traces, calls,
violations), on every family and both backends; writes and reads reach the program in the serial order even
when the model's replies come back out of order; a violation mid-flight still scores 0 and stops what follows;
and the requests in flight never exceed the endpoint's limit, for one evaluation or several sharing a gateway."""

from __future__ import annotations

import hashlib
import json
import re
import threading

import pytest

from mstar_ray.actors.wiring import RoleClients
from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.agent.concurrency import SERIAL, EvalConcurrency, Turns, TurnsStopped
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.llm.endpoint import DEFAULT_MAX_CONCURRENCY, EndpointConfig
from mstar_ray.llm.governor import Governor
from mstar_ray.llm.limits import EndpointLimit, LimitTable
from mstar_ray.llm.settings import EmbeddingConfig, LLMSettings
from mstar_ray.tasks.model import Task
from mstar_ray.families.task_registry import load_task
from tests.conftest import seed_source
from tests.scripted_server import ScriptedServer
from tests.test_rubric_family import FIXTURES

# Reads in the program's own process, in item order (evaluation.readers = 1): the protocol these tests pin down
# (a program whose process runs threads keeps it); reads from forked readers: tests/test_snapshot_readers.py.
assert SERIAL.readers == 1
WIDE = EvalConcurrency(in_flight=8, episodes=2, readers=1)

# Writes and reads as the program sees them: every read shows how many reads came before it and every write so far.
ORDER_PROGRAM = '''
from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text."
INSTRUCTION_QUERY = "Ask for the question."
INSTRUCTION_RESPONSE = "Answer from memory."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str


class KnowledgeBase:
    def __init__(self, toolkit):
        self.written = []
        self.reads = 0

    def write(self, item, raw_text):
        self.written.append(raw_text[:10])

    def read(self, query):
        self.reads += 1
        if self.reads == BREAK_AT:
            return "x" * 100000
        return f"read {self.reads}: " + " | ".join(self.written)[:2500]
'''


def order_program(break_at: int = 0) -> str:
    return ORDER_PROGRAM.replace("BREAK_AT", str(break_at))


def model_reply(messages: list[dict]) -> str:
    """A deterministic stand-in model: JSON steps get every field filled from the text, a judge a verdict by
    the prompt's hash, an actor and an answer the start of the memory shown."""
    prompt = messages[-1]["content"]
    digest = hashlib.sha256(prompt.encode()).digest()
    if "criteria_met" in prompt:
        return json.dumps({"explanation": "scripted", "criteria_met": digest[0] % 2 == 0})
    fields = re.findall(r'^- "(\w+)" \((\S+?)[ )]', prompt, re.MULTILINE)
    if fields:
        tail = prompt.rsplit(":\n", 1)[-1][:200]
        return json.dumps({name: [tail] if kind.startswith("list") else 0 if kind in ("int", "float") else
                           False if kind == "bool" else tail for name, kind in fields})
    memory = prompt.split("Memory:", 1)[-1].strip()
    return memory[:40] or "nothing"


def scrambled(messages: list[dict]) -> float:
    """Latency from the request's hash: replies come back in another order than they were asked."""
    return 0.01 + hashlib.sha256(messages[-1]["content"].encode()).digest()[0] / 255 * 0.12


def comparable(report) -> dict:
    return {
        "results": [r.model_dump(exclude={"seconds"}) for r in report.results],
        "calls": report.calls, "score": report.score, "texts_written": report.texts_written,
        "violation": report.violation.model_dump(exclude={"traceback"}) if report.violation else None,
        "llm": {step: (u.requests, u.cache_hits) for step, u in report.llm.items()},
    }


def offline(source: str, task: Task, concurrency: EvalConcurrency, **kwargs):
    backend = OfflineBackend()
    backend.waits = True  # the default would keep it serial; here its steps are to overlap like a model's
    return evaluate(source, task, backend, HashingEmbedder(), concurrency=concurrency, **kwargs)


def settings(url: str, limit: int = 3) -> LLMSettings:
    task = EndpointConfig(base_url=url, model="scripted", max_concurrency=limit, timeout_s=30, max_tokens=32)
    return LLMSettings(task=task, judge=task, embedding=EmbeddingConfig(kind="hashing"))


def with_model(url: str, source: str, task: Task, concurrency: EvalConcurrency, gateway=None, **kwargs):
    roles = RoleClients(settings(url), gateway=gateway)  # a cache of its own: no run helps another
    return evaluate(source, task, roles.backend(), roles.embedder(), concurrency=concurrency, **kwargs)


@pytest.fixture(scope="module")
def synthetic() -> Task:
    full = load_task("synthetic", seed=0)
    return full.model_copy(update={"items": full.items[:14]})


@pytest.fixture(scope="module")
def healthbench() -> Task:
    return load_task("healthbench", data=str(FIXTURES / "healthbench.jsonl"))


@pytest.fixture(scope="module")
def twc() -> Task:
    full = load_task("twc", train_games=6, validation_games=2, test_games=2)
    return full.model_copy(update={"items": full.items[:4]})


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(reply_for=model_reply, latency_for=scrambled) as running:
        yield running


@pytest.mark.parametrize("seed", ["vector_search", "llm_summarizer"])
def test_qa_offline_is_the_same_item_for_item(synthetic, seed):
    serial = offline(seed_source(seed), synthetic, SERIAL)
    assert serial.violation is None and serial.results[0].context
    assert comparable(offline(seed_source(seed), synthetic, WIDE)) == comparable(serial)


def test_qa_with_feedback_and_attribution_is_the_same(synthetic):
    taught = [item.id for item in synthetic.items[:4]]
    source = seed_source("memrl")
    serial = offline(source, synthetic, SERIAL, feedback_ids=taught, attribute=True)
    assert serial.calls["feedback"] == 4 and serial.stages is not None
    assert comparable(offline(source, synthetic, WIDE, feedback_ids=taught, attribute=True)) == comparable(serial)


def test_rubric_offline_is_the_same_item_for_item(healthbench):
    source = seed_source("vector_search")
    serial = offline(source, healthbench, SERIAL)
    assert serial.violation is None and serial.calls["grade"] > 0
    assert comparable(offline(source, healthbench, WIDE)) == comparable(serial)


def test_episodes_offline_are_the_same_game_for_game(twc):
    source = seed_source("experience_learner")
    serial = offline(source, twc, SERIAL)
    assert serial.violation is None and serial.calls["act"] > 0
    assert comparable(offline(source, twc, WIDE)) == comparable(serial)


@pytest.mark.parametrize("seed", ["vector_search", "llm_summarizer"])
def test_qa_with_a_model_is_the_same_and_stays_within_the_limit(server, synthetic, seed):
    serial = with_model(server.base_url, seed_source(seed), synthetic, SERIAL, judge=None)
    server.max_in_flight = 0
    wide = with_model(server.base_url, seed_source(seed), synthetic, WIDE)
    assert comparable(wide) == comparable(serial)
    assert 1 < server.max_in_flight <= 3  # overlapping, never above the endpoint's max_concurrency


def test_rubric_with_a_model_judge_is_the_same(server, healthbench):
    roles = RoleClients(settings(server.base_url))
    source = seed_source("vector_search")
    serial = with_model(server.base_url, source, healthbench, SERIAL, judge=roles.client("judge"))
    assert serial.calls["grade"] > 0
    wide = with_model(server.base_url, source, healthbench, WIDE, judge=RoleClients(settings(server.base_url)).client("judge"))
    assert comparable(wide) == comparable(serial)


def test_episodes_with_a_model_are_the_same(server, twc):
    source = seed_source("experience_learner")
    serial = with_model(server.base_url, source, twc, SERIAL)
    assert serial.calls["act"] > 0
    assert comparable(with_model(server.base_url, source, twc, WIDE)) == comparable(serial)


def test_writes_and_reads_reach_the_program_in_task_order(server, synthetic):
    serial = with_model(server.base_url, order_program(), synthetic, SERIAL)
    wide = with_model(server.base_url, order_program(), synthetic, WIDE)
    assert comparable(wide) == comparable(serial)
    firsts = " | ".join(text.text[:10] for text in synthetic.texts)
    assert [r.context for r in wide.results] == [f"read {i + 1}: {firsts}" for i in range(len(synthetic.items))]


@pytest.mark.parametrize("break_at", [1, 5])
def test_a_read_violation_mid_flight_scores_zero_and_stops_what_follows(server, synthetic, break_at):
    serial = with_model(server.base_url, order_program(break_at), synthetic, SERIAL)
    assert serial.violation is not None and serial.violation.kind == "read_too_long"
    wide = with_model(server.base_url, order_program(break_at), synthetic, WIDE)
    assert comparable(wide) == comparable(serial) | {"llm": comparable(wide)["llm"]}  # requests already sent may differ
    assert all(r.score == 0 for r in wide.results)
    assert wide.calls["query"] == break_at  # no item after the violating one was counted
    assert sum(1 for r in wide.results if r.context) == break_at - 1


def test_a_write_violation_stops_the_pipeline(server, synthetic):
    source = order_program().replace("        self.written.append(raw_text[:10])",
                                     "        self.written.append(raw_text[:10])\n"
                                     "        if len(self.written) == 3:\n            raise MemoryError('full')")
    serial = with_model(server.base_url, source, synthetic, SERIAL)
    assert serial.violation is not None and serial.violation.phase == "write"
    wide = with_model(server.base_url, source, synthetic, WIDE)
    assert comparable(wide) == comparable(serial) | {"llm": comparable(wide)["llm"]}
    assert wide.calls["extract"] == 3 and wide.llm["extract"].requests < len(synthetic.texts)


def test_evaluations_sharing_a_gateway_stay_within_its_limit(synthetic):
    with ScriptedServer(reply_for=model_reply, latency_s=0.05) as server:
        gateway = Governor.for_settings(settings(server.base_url, limit=2))
        reports = []
        runs = [threading.Thread(target=lambda i=i: reports.append(with_model(
            server.base_url, seed_source("vector_search").replace("Seed:", f"Seed {i}:"), synthetic, WIDE,
            gateway=gateway))) for i in range(3)]
        for run in runs:
            run.start()
        for run in runs:
            run.join()
        assert len(reports) == 3 and all(r.violation is None for r in reports)
        assert server.max_in_flight == 2
        assert gateway.snapshot().in_flight == {}


def test_the_run_wide_bound_holds_across_endpoints():
    table = LimitTable({"a": EndpointLimit(max_concurrency=5), "b": EndpointLimit(max_concurrency=5)}, max_in_flight=3)
    leases = [table.try_acquire(ep, 0.0)[0] for ep in ("a", "b", "a")]
    assert all(leases) and table.full("b") and table.try_acquire("b", 0.0)[0] is None
    table.release(leases[0])
    assert table.try_acquire("b", 0.0)[0] is not None


def test_a_busy_endpoint_holds_its_caller_until_a_slot_frees():
    gateway = Governor({"ep": EndpointLimit(max_concurrency=1)})
    first = gateway.admit("ep").lease
    refused = gateway.admit_waiting("ep", 0.05)
    assert refused.lease is None and refused.busy
    threading.Timer(0.1, gateway.release, [first]).start()
    assert gateway.admit_waiting("ep", 30.0).lease is not None


def test_the_default_in_flight_limit_is_one_for_a_server_on_this_machine():
    assert EndpointConfig(base_url="http://127.0.0.1:8080/v1", model="m").max_concurrency == 1
    assert EndpointConfig(base_url="http://localhost:8080/v1", model="m").max_concurrency == 1
    assert EndpointConfig(base_url="https://api.example.com/v1", model="m").max_concurrency == DEFAULT_MAX_CONCURRENCY
    assert EndpointConfig(base_url="http://127.0.0.1:8080/v1", model="m", max_concurrency=4).max_concurrency == 4
    assert EndpointConfig(base_url="http://127.0.0.1:8080/v1", model="m", max_concurrency=None).max_concurrency is None


def test_turns_keep_item_order_and_a_stop_releases_every_waiter():
    turns, seen = Turns(), []

    def item(turn: int) -> None:
        try:
            turns.wait(turn)
        except TurnsStopped:
            seen.append(("stopped", turn))
            return
        seen.append(turn)
        turns.done(turn)

    threads = [threading.Thread(target=item, args=(t,)) for t in (3, 1, 2, 0)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [0, 1, 2, 3]
    turns = Turns()
    turns.done(1)  # an item that ended without reading passes its turn
    turns.done(0)
    turns.wait(2)
    waiter = threading.Thread(target=item, args=(5,))
    waiter.start()
    turns.stop()
    waiter.join()
    assert seen[-1] == ("stopped", 5)
