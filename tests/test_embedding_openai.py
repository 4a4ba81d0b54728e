"""The OpenAI-compatible embeddings client: a real llama.cpp server, plus a loopback stub for bad replies."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from mstar_ray.embedding.embedder import Embedder
from mstar_ray.embedding.openai_embeddings import EmbeddingEndpointError, OpenAIEmbedder
from tests.llm_server import LlamaServer, free_port

# A reply for one request: (HTTP status, JSON body), computed from the list of input texts.
Reply = Callable[[list[str]], tuple[int, Any]]


def _vector(text: str) -> list[float]:
    """A deterministic, deliberately unnormalised 4-d vector per text."""
    return [float(len(text)), 1.0, float(text.count("a")), 2.0]


def _good(inputs: list[str]) -> tuple[int, Any]:
    # Reversed on purpose: clients must order by "index", not by position in the list.
    data = [{"object": "embedding", "index": i, "embedding": _vector(t)} for i, t in enumerate(inputs)][::-1]
    return 200, {"object": "list", "data": data, "model": "stub", "usage": {"prompt_tokens": 1, "total_tokens": 1}}


class StubServer:
    """/v1/embeddings on a loopback port; records each request's inputs and Authorization header."""

    def __init__(self, reply: Reply = _good) -> None:
        self.reply = reply
        self.requests: list[tuple[list[str], str | None]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append((body["input"], self.headers.get("Authorization")))
                status, payload = stub.reply(body["input"])
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stub() -> Iterator[StubServer]:
    server = StubServer()
    yield server
    server.close()


def _embedder(url: str, **kwargs: Any) -> OpenAIEmbedder:
    return OpenAIEmbedder(url, "emb-model", max_retries=0, timeout_s=10, **kwargs)


def test_batches_orders_and_normalises(stub: StubServer) -> None:
    texts = ["a", "banana", "", "cat", "alpha beta", "x" * 9, "aaaa"]
    embedder = _embedder(stub.base_url, batch_size=3)
    assert embedder.name == "openai:emb-model"
    vectors = embedder.embed(texts)
    assert [inputs for inputs, _ in stub.requests] == [texts[0:3], texts[3:6], texts[6:]]
    for text, vector in zip(texts, vectors):
        expected = np.asarray(_vector(text)) / np.linalg.norm(_vector(text))
        np.testing.assert_allclose(vector, expected, atol=1e-12)
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-12)
    assert embedder.dim == 4 and len(stub.requests) == 3  # learnt from the replies, no extra request
    assert embedder.embed([]) == [] and len(stub.requests) == 3
    with pytest.raises(TypeError):
        embedder.embed("one string")  # type: ignore[arg-type]


def test_dim_probes_once_when_unknown(stub: StubServer) -> None:
    embedder: Embedder = _embedder(stub.base_url)
    assert embedder.dim == 4 and embedder.dim == 4
    assert len(stub.requests) == 1
    assert _embedder(stub.base_url, dim=4).dim == 4 and len(stub.requests) == 1


def test_key_from_named_variable(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MSTAR_TEST_EMBED_KEY", raising=False)
    with pytest.raises(EmbeddingEndpointError, match="MSTAR_TEST_EMBED_KEY") as info:
        _embedder(stub.base_url, api_key_env="MSTAR_TEST_EMBED_KEY")
    assert stub.base_url in str(info.value)
    monkeypatch.setenv("MSTAR_TEST_EMBED_KEY", "sk-test-123")
    _embedder(stub.base_url, api_key_env="MSTAR_TEST_EMBED_KEY").embed(["hi"])
    assert stub.requests[-1][1] == "Bearer sk-test-123"


def _bad_reply_error(reply: Reply, **kwargs: Any) -> str:
    server = StubServer(reply)
    try:
        with pytest.raises(EmbeddingEndpointError) as info:
            _embedder(server.base_url, **kwargs).embed(["one", "two"])
    finally:
        server.close()
    message = str(info.value)
    assert server.base_url in message and "emb-model" in message
    return message


def test_wrong_number_of_vectors() -> None:
    assert "returned 1 vectors" in _bad_reply_error(lambda inputs: _good(inputs[:1]))


def test_duplicate_indices() -> None:
    def reply(inputs: list[str]) -> tuple[int, Any]:
        status, body = _good(inputs)
        for item in body["data"]:
            item["index"] = 0
        return status, body

    assert "for 2 texts" in _bad_reply_error(reply)


def test_per_token_vectors_name_pooling() -> None:
    def reply(inputs: list[str]) -> tuple[int, Any]:
        data = [{"object": "embedding", "index": i, "embedding": [[0.1, 0.2], [0.3, 0.4]]} for i in range(len(inputs))]
        return 200, {"object": "list", "data": data, "model": "stub"}

    assert "pooling" in _bad_reply_error(reply)


def test_wrong_dimension() -> None:
    assert "expected dimension 8" in _bad_reply_error(_good, dim=8)


def test_http_error_status() -> None:
    message = _bad_reply_error(lambda inputs: (400, {"error": {"message": "model not loaded", "type": "x"}}))
    assert "HTTP 400" in message and "model not loaded" in message


def test_unreachable_url_fails_fast() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    embedder = _embedder(url)
    attempts = []  # requests the HTTP client sent: fast is one per call, refused at once, never waited out
    embedder._client._client.event_hooks["request"].append(attempts.append)
    with pytest.raises(EmbeddingEndpointError, match="unreachable") as info:
        embedder.embed(["hello"])
    assert url in str(info.value) and "emb-model" in str(info.value)
    with pytest.raises(EmbeddingEndpointError, match="unreachable") as probed:
        embedder.probe()
    assert len(attempts) == 2  # no retry of a refused connection
    assert "Connection error" in str(info.value) + str(probed.value) and "timed out" not in str(info.value)


@pytest.mark.slow
def test_real_llama_cpp_server(llm_embedding_server: LlamaServer) -> None:
    embedder = OpenAIEmbedder(
        llm_embedding_server.base_url, llm_embedding_server.model, timeout_s=120, max_retries=1, batch_size=2
    )
    assert embedder.probe() == embedder.dim > 0
    texts = ["A man is eating food.", "The cat sits outside.", "A man is eating food.", "Paris in summer."]
    vectors = np.asarray(embedder.embed(texts))
    assert vectors.shape == (4, embedder.dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-9)
    # The same text in another batch and position gets the same vector; different texts do not.
    assert vectors[0] @ vectors[2] > 0.999
    assert vectors[0] @ vectors[1] < 0.999
    backward = np.asarray(embedder.embed(texts[::-1]))
    np.testing.assert_allclose(backward[::-1] @ vectors.T, vectors @ vectors.T, atol=1e-3)


@pytest.mark.slow
def test_real_server_without_embeddings(llm_server: LlamaServer) -> None:
    """A llama.cpp server started without --embedding answers HTTP 500: the error says where and why."""
    embedder = OpenAIEmbedder(llm_server.base_url, llm_server.model, max_retries=0, timeout_s=30)
    with pytest.raises(EmbeddingEndpointError, match="HTTP 500") as info:
        embedder.probe()
    assert llm_server.base_url in str(info.value) and "'smollm2'" in str(info.value)
    assert "embedding" in str(info.value)


def test_a_remote_embedder_goes_through_the_runs_limits_prices_and_budget() -> None:
    """Like a chat call: admitted by the gateway (its endpoint's concurrency limit holds across callers),
    priced from the run's table, counted against the budget, and logged through the role clients."""
    from mstar_ray.actors.wiring import RoleClients
    from mstar_ray.llm.errors import BudgetExceeded
    from mstar_ray.llm.governor import Governor
    from mstar_ray.llm.settings import LLMSettings
    from tests.scripted_server import ScriptedServer

    with ScriptedServer(latency_s=0.1) as server:
        settings = LLMSettings.model_validate({
            "embedding": {"kind": "openai", "base_url": server.base_url, "model": "emb", "max_concurrency": 1,
                          "batch_size": 2},
            "prices": {"emb": {"input_per_mtok": 1000.0}}, "budget": {"max_usd": 0.025}})
        assert settings.limits()[settings.embedding.endpoint_key].max_concurrency == 1
        gateway = Governor(settings.limits(), settings.prices, settings.budget)
        roles = RoleClients(settings, gateway=gateway)
        embedders = [roles.embedder() for _ in range(3)]  # each asks for its dimension once: 1 token
        threads = [threading.Thread(target=e.embed, args=([f"text {i} one", f"text {i} two"],))
                   for i, e in enumerate(embedders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert server.requests == 6 and server.max_in_flight == 1
        usage = gateway.snapshot().by_role["embedding"]
        assert usage.calls == 6 and usage.prompt_tokens == 21 and usage.cost_usd == pytest.approx(0.021)
        calls = roles.drain_calls()
        assert sorted((c.role, c.model, c.step, c.prompt_tokens) for c in calls) == (
            [("embedding", "emb", "embed", 1)] * 3 + [("embedding", "emb", "embed", 6)] * 3)
        assert sum(c.cost_usd for c in calls) == pytest.approx(usage.cost_usd)
        embedders[0].embed(["a new text to embed"])  # $0.026: over the budget once answered
        with pytest.raises(BudgetExceeded, match="budget spent"):
            embedders[0].embed(["one more text"])
        assert server.requests == 7


def test_a_budget_in_dollars_needs_the_embedding_models_price() -> None:
    from mstar_ray.llm.settings import LLMSettings

    with pytest.raises(ValueError, match="prices has no entry for model.* emb"):
        LLMSettings.model_validate({"embedding": {"kind": "openai", "base_url": "http://x/v1", "model": "emb"},
                                    "budget": {"max_usd": 1}})
