"""The LLM client's behaviour toward a user: retries with Retry-After on a 429 storm, clear errors for a
dead endpoint or retries used up, run-wide concurrency and budget limits, and the cache."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from mstar_ray.driver.run_dir import RunDir
from mstar_ray.llm.cache import MemoryCache, SqliteCache, request_key
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig
from mstar_ray.llm.errors import BudgetExceeded, EndpointError
from mstar_ray.llm.governor import Governor
from mstar_ray.llm.ledger import Budget, Price
from mstar_ray.llm.limits import EndpointLimit, LimitTable
from mstar_ray.llm.retry import RetryPolicy, parse_retry_after
from mstar_ray.runlog import read_rows
from tests.llm_server import free_port
from tests.scripted_server import RESET, ScriptedServer

HI = [{"role": "user", "content": "hi"}]


def client_for(url: str, *, role: str = "task", cache=None, gateway=None, **config) -> LLMClient:
    endpoint = ChatEndpoint(role, EndpointConfig(base_url=url, model="scripted", **config))
    retry = RetryPolicy(max_retries=config.get("max_retries", 4), base_s=0.01, cap_s=0.05)
    return LLMClient(endpoint, cache=cache, gateway=gateway, retry=retry)


def test_a_429_storm_is_waited_out_honouring_retry_after(caplog):
    with ScriptedServer() as server:
        server.fail_next(3, 429, {"retry-after-ms": "300"})
        client = client_for(server.base_url)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="mstar_ray.llm"):
            completion = client.complete(HI, step="answer")
        elapsed = time.monotonic() - started
    assert completion.text == '{"answer": "ok"}' and completion.retries == 3
    assert elapsed >= 0.9  # three waits of at least the 0.3 s the server asked for
    assert client.usage()["answer"].retries == 3 and server.requests == 4
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 3 and all("HTTP 429" in w and server.base_url in w and "role 'task'" in w for w in warnings)


def test_retries_used_up_give_one_clear_error():
    with ScriptedServer() as server:
        server.fail_next(10, 503)
        client = client_for(server.base_url, max_retries=2)
        with pytest.raises(EndpointError) as caught:
            client.complete(HI, step="answer")
    message = str(caught.value)
    assert "after 3 attempt(s)" in message and "HTTP 503" in message and server.base_url in message
    assert server.requests == 3


def test_what_a_dying_served_replica_answers_is_retried(caplog):
    """A replica that dies mid-request: Serve's proxy answers 500 for the call it had, 503 while no replica can
    take one, a gateway in front 502; a process that dies holding the connection resets it."""
    with ScriptedServer() as server:
        for status in (500, 502, 503, RESET):
            server.fail_next(1, status)
        with caplog.at_level(logging.WARNING, logger="mstar_ray.llm"):
            completion = client_for(server.base_url).complete(HI, step="answer")
    assert completion.text == '{"answer": "ok"}' and completion.retries == 4 and server.requests == 5
    warnings = [r.getMessage() for r in caplog.records]
    assert [next((code for code in ("HTTP 500", "HTTP 502", "HTTP 503", "connection failed") if code in w), w)
            for w in warnings] == ["HTTP 500", "HTTP 502", "HTTP 503", "connection failed"]


def test_a_client_error_is_not_retried():
    with ScriptedServer() as server:
        server.fail_next(1, 400)
        with pytest.raises(EndpointError, match="HTTP 400"):
            client_for(server.base_url).complete(HI, step="answer")
        assert server.requests == 1


def test_a_retry_after_longer_than_allowed_stops_at_once():
    with ScriptedServer() as server:
        server.fail_next(1, 429, {"retry-after": "3600"})
        with pytest.raises(EndpointError, match="Retry-After"):
            client_for(server.base_url).complete(HI, step="answer")


def test_a_dead_endpoint_fails_after_its_retries_naming_role_and_url():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(EndpointError) as caught:
        client_for(url, role="judge", max_retries=1).complete(HI, step="judge")
    assert "role 'judge'" in str(caught.value) and url in str(caught.value) and "connection" in str(caught.value)


def _hammer(client: LLMClient, n: int) -> None:
    threads = [threading.Thread(target=client.complete, args=([{"role": "user", "content": f"q{i}"}],),
                                kwargs={"step": "answer"}) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_max_concurrency_holds_across_clients_sharing_a_gateway():
    with ScriptedServer(latency_s=0.15) as server:
        config = EndpointConfig(base_url=server.base_url, model="scripted", max_concurrency=2)
        gateway = Governor({config.endpoint_key: EndpointLimit(max_concurrency=2)})
        clients = [client_for(server.base_url, gateway=gateway) for _ in range(3)]
        threads = [threading.Thread(target=_hammer, args=(c, 3)) for c in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert server.requests == 9 and server.max_in_flight == 2


def test_without_a_limit_the_same_load_runs_wider():
    with ScriptedServer(latency_s=0.15) as server:
        _hammer(client_for(server.base_url), 6)
        assert server.max_in_flight > 2  # so the limit test above measures the limit, not the load


def test_a_429_pauses_every_caller_of_that_endpoint():
    gateway = Governor()
    gateway.pause("ep", 0.5)
    assert gateway.admit("ep").lease is None and gateway.admit("ep").wait_s > 0.3
    assert gateway.admit("other").lease is not None


def test_requests_per_minute_window():
    table = LimitTable({"ep": EndpointLimit(requests_per_minute=2)})
    assert table.try_acquire("ep", 0.0)[0] and table.try_acquire("ep", 1.0)[0]
    lease, wait = table.try_acquire("ep", 2.0)
    assert lease is None and wait == pytest.approx(58.0)
    assert table.try_acquire("ep", 60.5)[0] is not None


def test_an_abandoned_lease_expires():
    table = LimitTable({"ep": EndpointLimit(max_concurrency=1)}, lease_ttl_s=10)
    assert table.try_acquire("ep", 0.0)[0] is not None
    assert table.try_acquire("ep", 5.0)[0] is None
    assert table.try_acquire("ep", 10.5)[0] is not None


def test_the_budget_stops_new_calls_and_says_why():
    with ScriptedServer() as server:
        gateway = Governor(prices={"scripted": Price(input_per_mtok=1000, output_per_mtok=2000)},
                           budget=Budget(max_usd=0.05))
        client = client_for(server.base_url, gateway=gateway)
        made = 0
        with pytest.raises(BudgetExceeded) as caught:
            for i in range(10):
                client.complete([{"role": "user", "content": f"q{i}"}], step="answer")
                made += 1
    # each call: 10 prompt + 5 completion tokens = $0.02
    assert made == 3 and server.requests == 3
    assert "$0.06" in str(caught.value) and "role 'task'" in str(caught.value)
    snapshot = gateway.snapshot()
    assert snapshot.by_role["task"].calls == 3 and snapshot.total.cost_usd == pytest.approx(0.06)


def test_each_request_is_priced_once_and_logged_as_the_budget_counted_it(tmp_path):
    """One record per request: the gateway prices it (failed attempts free their lease and cost nothing, a
    cache hit costs nothing), and the run log stores that record as it is, with the program it served."""
    with ScriptedServer() as server:
        server.fail_next(2, 503)
        config = EndpointConfig(base_url=server.base_url, model="scripted", max_concurrency=1)
        gateway = Governor({config.endpoint_key: EndpointLimit(max_concurrency=1)},
                           prices={"scripted": Price(input_per_mtok=1000, output_per_mtok=3000)})
        client = client_for(server.base_url, cache=MemoryCache(), gateway=gateway, max_concurrency=1)
        client.complete(HI, step="answer")  # two failed attempts, then answered
        client.complete(HI, step="answer")  # the cache
        client.complete([{"role": "user", "content": "again"}], step="query")
    calls = client.drain_calls()
    # each answer: 10 prompt tokens at $1000/M + 5 completion tokens at $3000/M = $0.025
    assert [(c.step, c.cache_hit, c.retries, c.cost_usd) for c in calls] == [
        ("answer", False, 2, pytest.approx(0.025)), ("answer", True, 0, 0.0), ("query", False, 0, pytest.approx(0.025))]
    assert sum(c.cost_usd for c in calls) == gateway.snapshot().total.cost_usd
    assert gateway.snapshot().by_role["task"].calls == 2 and server.requests == 4
    run_dir = RunDir(tmp_path)
    run_dir.write_calls(calls, candidate="c" * 16)
    run_dir.close()
    rows = read_rows(tmp_path, "llm_calls")
    assert [row.model_dump(exclude={"at", "candidate", "parent"}) for row in rows] == [c.model_dump() for c in calls]
    assert {row.candidate for row in rows} == {"c" * 16}


def test_identical_requests_are_answered_by_the_cache(tmp_path):
    with ScriptedServer() as server:
        cache = SqliteCache(tmp_path / "cache.sqlite")
        client_for(server.base_url, cache=cache).complete(HI, step="extract", json_mode=True)
        # a new client in a new "process" (a new store object on the same file) hits the cache
        again = client_for(server.base_url, cache=SqliteCache(tmp_path / "cache.sqlite"))
        completion = again.complete(HI, step="extract", json_mode=True)
        different = again.complete(HI, step="extract", json_mode=True, max_tokens=7)
        assert completion.cached and not different.cached
        assert server.requests == 2
        usage = again.usage()["extract"]
        assert (usage.requests, usage.cache_hits, usage.new_calls) == (2, 1, 1)


def test_identical_requests_in_flight_at_once_are_sent_once():
    """Evaluators starting siblings at the same moment ask for the same extractions: one caller sends each,
    the others wait for its reply in the run's cache (before, every caller paid for its own)."""
    with ScriptedServer(latency_s=0.3) as server:
        cache = MemoryCache()
        clients = [client_for(server.base_url, cache=cache) for _ in range(4)]
        replies: list = []
        threads = [threading.Thread(target=lambda c=c: replies.append(c.complete(HI, step="extract"))) for c in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert server.requests == 1
        assert sorted(r.cached for r in replies) == [False, True, True, True]
        assert len({r.text for r in replies}) == 1


def test_a_failed_request_frees_its_reservation_so_a_waiter_sends_it_itself():
    with ScriptedServer() as server:
        server.fail_next(1, 400)  # not retried: the first caller gives up at once
        cache = MemoryCache()
        with pytest.raises(EndpointError):
            client_for(server.base_url, cache=cache).complete(HI, step="extract")
        assert cache.reserve(request_key("chat", _body(server.base_url)), 60).mine  # nobody holds it now
        cache.abandon(request_key("chat", _body(server.base_url)))
        assert client_for(server.base_url, cache=cache).complete(HI, step="extract").text
        assert server.requests == 2


def test_a_reservation_lapses_so_nobody_waits_on_a_dead_caller_for_ever():
    cache = MemoryCache()
    assert cache.reserve("k", 0.2).mine
    assert not cache.reserve("k", 0.2).mine and cache.reserve("k", 0.2).value is None  # held: wait
    time.sleep(0.25)
    assert cache.reserve("k", 0.2).mine  # its holder never answered: the next caller sends it
    cache.put_many({"k": b"v"})
    assert cache.reserve("k", 0.2).value == b"v"


def _body(url: str) -> dict:
    return ChatEndpoint("task", EndpointConfig(base_url=url, model="scripted")).payload(HI, json_mode=False,
                                                                                       max_tokens=None)


def test_the_key_covers_the_whole_request():
    base = {"model": "m", "messages": HI, "temperature": 0.0, "max_tokens": 5}
    assert request_key("chat", base) == request_key("chat", dict(reversed(base.items())))
    for change in ({"model": "n"}, {"temperature": 0.5}, {"max_tokens": 6}, {"response_format": {"type": "json_object"}}):
        assert request_key("chat", {**base, **change}) != request_key("chat", base)
    assert request_key("embedding", base) != request_key("chat", base)


def test_the_first_value_written_wins():
    cache = MemoryCache()
    cache.put_many({"k": b"first"})
    cache.put_many({"k": b"second"})
    assert cache.get_many(["k", "absent"]) == {"k": b"first"}


def test_retry_after_forms():
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert 0 <= parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) < 1  # a past date: now
    assert parse_retry_after({}) is None


def test_backoff_grows_and_respects_retry_after():
    import random

    policy = RetryPolicy(base_s=1.0, cap_s=8.0)
    rng = random.Random(0)
    assert all(0 <= policy.delay(1, None, rng) <= 1.0 for _ in range(50))
    assert max(policy.delay(4, None, rng) for _ in range(50)) > 4.0
    assert all(policy.delay(9, None, rng) <= 8.0 for _ in range(50))
    assert policy.delay(1, 5.0, rng) >= 5.0
