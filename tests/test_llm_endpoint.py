"""The task agent against a real OpenAI-compatible server (llama.cpp + SmolLM2-135M), and the failure
paths a user meets: a dead endpoint, a missing key, a server that answers too slowly."""

from __future__ import annotations

import http.server
import threading
import time

import pytest

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.llm_backend import LLMBackend
from mstar_ray.contract import inspect_program
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.llm.cache import SqliteCache
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig
from mstar_ray.llm.errors import EndpointError
from mstar_ray.llm.structured import conform
from mstar_ray.tasks.model import Task
from mstar_ray.families.task_registry import load_task
from tests.conftest import seed_source
from tests.llm_server import free_port


def client_for(server, cache=None, role: str = "task", **overrides) -> LLMClient:
    config = EndpointConfig(base_url=server.base_url, model=server.model, max_tokens=96, max_retries=1, **overrides)
    return LLMClient(ChatEndpoint(role, config), cache=cache)


@pytest.mark.slow
def test_json_mode_extraction_round_trip(llm_server):
    backend = LLMBackend(client_for(llm_server))
    fields = inspect_program(seed_source("vector_search")).schema.knowledge_item
    item = backend.extract_item(
        "Fill the fields from the text.", fields, "[8 May 2023] Caroline: I adopted a puppy called Biscuit today."
    )
    assert conform(item, fields)[1] == []
    assert set(item) == {f.name for f in fields}
    usage = backend.usage()["extract"]
    assert usage.requests == 1 + backend.stats["json_retries"] and usage.prompt_tokens > 0


@pytest.mark.slow
def test_whole_eval_of_a_seed_through_the_real_server(llm_server):
    full = load_task("synthetic", seed=1, granularity="turn")  # a few short texts for a small model
    texts = full.texts[:6]
    task = Task(name="synthetic/tiny", texts=texts, items=full.items[:2])
    backend = LLMBackend(client_for(llm_server))
    report = evaluate(seed_source("llm_summarizer"), task, backend, HashingEmbedder())
    assert report.violation is None, report.violation
    assert report.texts_written == len(texts)
    assert report.calls["toolkit_llm"] == 2  # the summariser's one call per read
    assert report.llm["extract"].requests >= len(texts) and report.llm["toolkit"].requests == 2
    assert report.llm["answer"].requests == 2
    assert all(0.0 <= r.score <= 1.0 for r in report.results)


@pytest.mark.slow
def test_a_server_killed_mid_run_gives_a_clear_error(llm_server_factory):
    server = llm_server_factory()
    client = client_for(server)
    assert client.endpoint.ping()
    assert client.complete([{"role": "user", "content": "Say hi."}], step="answer", max_tokens=4).text is not None
    server.kill()
    with pytest.raises(EndpointError) as caught:
        client.complete([{"role": "user", "content": "Say hi again."}], step="answer", max_tokens=4)
    message = str(caught.value)
    assert "role 'task'" in message and server.base_url in message and "after 2 attempt(s)" in message
    assert client.usage()["answer"].retries == 1


def test_an_unreachable_endpoint_is_named_before_any_evaluation():
    config = EndpointConfig(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", max_retries=0)
    with pytest.raises(EndpointError) as caught:
        ChatEndpoint("reflector", config).ping()
    assert "role 'reflector'" in str(caught.value) and "unreachable" in str(caught.value)


def test_a_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("MSTAR_TEST_KEY", raising=False)
    config = EndpointConfig(base_url="http://127.0.0.1:1/v1", model="m", api_key_env="MSTAR_TEST_KEY")
    with pytest.raises(EndpointError) as caught:
        ChatEndpoint("judge", config)
    assert "MSTAR_TEST_KEY" in str(caught.value) and "judge" in str(caught.value)


class _SlowHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        time.sleep(3)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_server_that_answers_too_slowly_times_out():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        endpoint = ChatEndpoint("task", EndpointConfig(base_url=url, model="m", timeout_s=0.5, max_retries=1))
        with pytest.raises(EndpointError) as caught:
            LLMClient(endpoint).complete([{"role": "user", "content": "hi"}], step="answer")
        # the behaviour, not the time it took: each of the two attempts ended by its 0.5 s timeout, none by the reply
        assert "timed out after 0.5 s" in str(caught.value) and "after 2 attempt(s)" in str(caught.value)
    finally:
        server.shutdown()


READ_ONLY_CHANGE = (
    '''        return "\\n\\n".join(docs)[:MAX_CONTEXT_CHARS]''',
    '''        return "\\n---\\n".join(reversed(docs))[:MAX_CONTEXT_CHARS]''',
)


@pytest.mark.slow
def test_a_child_that_changed_only_read_costs_no_new_extraction_calls(llm_server, tmp_path):
    full = load_task("synthetic", seed=2, granularity="turn")
    task = Task(name="synthetic/tiny", texts=full.texts[:5], items=full.items[:3])
    parent = seed_source("vector_search")
    child = parent.replace(*READ_ONLY_CHANGE)
    assert child != parent
    first = evaluate(parent, task, LLMBackend(client_for(llm_server, SqliteCache(tmp_path / "c.sqlite"))), HashingEmbedder())
    # a fresh client on the same cache file, as a worker on another machine or after a resume would be
    second = evaluate(child, task, LLMBackend(client_for(llm_server, SqliteCache(tmp_path / "c.sqlite"))), HashingEmbedder())
    assert first.llm["extract"].new_calls >= 5
    assert second.llm["extract"].requests == first.llm["extract"].requests
    assert second.llm["extract"].new_calls == 0 and second.llm["query"].new_calls == 0
    assert second.llm["answer"].requests == 3


@pytest.mark.slow
def test_the_judge_gives_a_verdict_per_answer(llm_server):
    from mstar_ray.families.qa.judge import Judge

    judge = Judge(client_for(llm_server, role="judge"))
    verdicts = [judge("Where did Ana move?", "Lisbon", "Lisbon"), judge("Where did Ana move?", "Lisbon", "")]
    assert verdicts[0] in (0.0, 1.0, None) and verdicts[1] == 0.0
    assert judge.client.usage()["judge"].requests == 1  # an empty answer is wrong without asking
