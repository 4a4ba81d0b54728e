"""The in-flight limit is what the listening server says it serves at once (mstar_ray.llm.parallelism): learned
at start-up from a real HTTP server, said in the run's first lines with the key that changes it, kept when the
user set it, and held by the run's gateway."""

from __future__ import annotations

import concurrent.futures

import pytest

from mstar_ray.actors.wiring import RoleClients, fitted_evaluation, probe_endpoints
from mstar_ray.agent.evaluation import evaluate
from mstar_ray.driver.run_dir import RunDir
from mstar_ray.families.task_registry import load_task
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.endpoint import DEFAULT_MAX_CONCURRENCY, ChatEndpoint, EndpointConfig
from mstar_ray.llm.governor import Governor
from mstar_ray.llm.cache import MemoryCache
from mstar_ray.llm.parallelism import VLLM_MAX_NUM_SEQS, learn
from mstar_ray.llm.settings import EmbeddingConfig, LLMSettings
from mstar_ray.results import UNLIMITED_IN_FLIGHT, EvalConcurrency
from mstar_ray.run_config import RunConfig, load_run_config
from mstar_ray.runlog import layout
from mstar_ray.serve.config import ServeConfig
from tests.conftest import seed_source
from tests.scripted_server import ScriptedServer


def _settings(url: str, **task) -> LLMSettings:
    return LLMSettings(task={"base_url": url, "model": "scripted", "timeout_s": 30, "max_tokens": 16, **task})


def _probe(settings: LLMSettings) -> tuple[LLMSettings, list[str]]:
    lines: list[str] = []
    return probe_endpoints(settings, lines.append), lines


@pytest.mark.parametrize(("routes", "limit", "says"), [
    ({"/props": {"total_slots": 4}}, 4, "llama.cpp server has 4 slot(s) (/props"),
    ({"/slots": [{"id": 0}, {"id": 1}, {"id": 2}]}, 3, "llama.cpp server has 3 slot(s) (/slots)"),
    ({"/v1/models": {"object": "list", "data": [{"id": "m", "owned_by": "vllm"}]}}, VLLM_MAX_NUM_SEQS, "vLLM"),
    ({"/v1/models": {"object": "list", "data": [{"id": "m", "owned_by": "sglang"}]},
      "/get_server_info": {"max_running_requests": 48}}, 48, "SGLang server runs 48"),
    ({"/v1/models": {"object": "list", "data": [{"id": "m", "owned_by": "me"}]}}, 1, "llama-cpp-python"),
    ({}, 1, "does not say"),
    ({"/props": {"total_slots": "many"}}, 1, "does not say"),  # a value that is no count is not believed
])
def test_the_limit_is_learned_from_what_the_server_says(routes, limit, says):
    with ScriptedServer(get_json=routes) as server:
        probed, lines = _probe(_settings(server.base_url))
    assert probed.task.max_concurrency == limit
    assert probed.limits()[probed.task.endpoint_key].max_concurrency == limit
    line = next(line for line in lines if "request(s) at once" in line)
    assert f"at most {limit} request(s) at once" in line and says in line
    assert "set llm.task.max_concurrency to change it" in line


def test_a_limit_the_user_set_is_kept_and_the_server_not_asked():
    with ScriptedServer(get_json={"/props": {"total_slots": 8}}) as server:
        probed, lines = _probe(_settings(server.base_url, max_concurrency=3))
        asked = list(server.gets)
    assert probed.task.max_concurrency == 3
    assert not any(path in ("/props", "/slots") for path in asked)
    assert any("at most 3 request(s) at once (set in the config)" in line for line in lines)
    # null is the user's too: no limit, said so
    with ScriptedServer(get_json={"/props": {"total_slots": 8}}) as server:
        probed, lines = _probe(_settings(server.base_url, max_concurrency=None))
    assert probed.task.max_concurrency is None
    assert any("no limit (set in the config)" in line for line in lines)


def test_a_hosted_endpoint_that_says_nothing_gets_the_hosted_default():
    # learn() on an address that is not this machine's and answers nothing: nothing learned, the hosted default
    config = EndpointConfig(base_url="http://192.0.2.1:9/v1", model="m")  # TEST-NET-1: never routed
    assert config.max_concurrency == DEFAULT_MAX_CONCURRENCY and not config.concurrency_set
    assert learn(config).limit == DEFAULT_MAX_CONCURRENCY


def test_the_learned_limit_holds_at_the_server():
    """Twelve requests at once from four threads' worth of slots: the server never sees more than it has."""
    with ScriptedServer(latency_s=0.3, get_json={"/props": {"total_slots": 2}}) as server:
        probed, _ = _probe(_settings(server.base_url))
        gateway = Governor.for_settings(probed)
        client = LLMClient(ChatEndpoint("task", probed.task), cache=MemoryCache(), gateway=gateway)
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            list(pool.map(lambda i: client.complete([{"role": "user", "content": f"q{i}"}], step="t"), range(12)))
        assert server.requests == 12
        assert server.max_in_flight == 2


def test_a_served_model_runs_as_many_at_once_as_its_replicas_take():
    serve = ServeConfig(models=[{"name": "small", "runtime": "llama_cpp", "model": "x.gguf", "replicas": {"min": 1, "max": 3},
                                 "max_ongoing_requests": 2}])
    assert serve.parallel() == {"small": 6}
    settings = LLMSettings(task={"served": "small"})
    at = settings.at_served({"small": "http://127.0.0.1:8000/small/v1"}, serve.parallel())
    assert at.task.max_concurrency == 6 and "served replicas" in at.task.in_flight_source
    own = LLMSettings(task={"served": "small", "max_concurrency": 1})
    assert own.at_served({"small": "http://127.0.0.1:8000/small/v1"}, serve.parallel()).task.max_concurrency == 1


VLLM = {"/v1/models": {"object": "list", "data": [{"id": "m", "owned_by": "vllm"}]}}


@pytest.mark.parametrize(("routes", "set_in_flight", "in_flight", "says", "ahead"), [
    (VLLM, None, VLLM_MAX_NUM_SEQS, "what the task endpoint admits", True),
    # four slots are the bottleneck whatever the order: the queries are not mixed into the extractions' prompts
    ({"/props": {"total_slots": 4}}, None, 16, "the default; the task endpoint admits 4", False),
    (VLLM, 8, 8, "from the config", True),
])
def test_one_evaluation_keeps_in_flight_what_the_task_endpoint_admits(routes, set_in_flight, in_flight, says, ahead):
    with ScriptedServer(get_json=routes) as server:
        probed, lines = _probe(_settings(server.base_url))
    given = EvalConcurrency() if set_in_flight is None else EvalConcurrency(in_flight=set_in_flight)
    fitted = fitted_evaluation(given, probed, lines.append)
    assert fitted.in_flight == in_flight and fitted.readers == given.readers and fitted.queries_ahead is ahead
    line = lines[-1]
    assert line.startswith(f"evaluation.in_flight {in_flight}: ") and says in line
    assert f"the items' queries built while the writes run: {'yes' if ahead else 'no'} (" in line
    assert line.endswith("set evaluation.in_flight or evaluation.queries_ahead to change them")


def test_queries_ahead_set_in_the_config_is_kept_and_said_so():
    with ScriptedServer(get_json={"/props": {"total_slots": 4}}) as server:
        probed, lines = _probe(_settings(server.base_url))
    fitted = fitted_evaluation(EvalConcurrency(queries_ahead=True), probed, lines.append)
    assert fitted.queries_ahead and fitted.in_flight == 16
    assert "the items' queries built while the writes run: yes (from the config)" in lines[-1]


def test_an_endpoint_with_no_limit_gets_the_references_pool_and_the_offline_agent_is_not_told():
    with ScriptedServer() as server:
        probed, lines = _probe(_settings(server.base_url, max_concurrency=None))
    assert fitted_evaluation(EvalConcurrency(), probed, lines.append).in_flight == UNLIMITED_IN_FLIGHT
    assert "the task endpoint has no limit" in lines[-1]
    said: list[str] = []
    assert fitted_evaluation(EvalConcurrency(), LLMSettings(), said.append) == EvalConcurrency() and not said


def test_an_evaluation_fitted_to_a_vllm_server_keeps_more_than_the_default_in_flight():
    """Twenty-four requests are held until all are in flight at once: 16 (the default) never get there."""
    task = load_task("synthetic", seed=0)
    task = task.model_copy(update={"items": task.items[:12]})  # 16 extractions and 12 queries: 28 at once
    with ScriptedServer(get_json=VLLM) as server:
        probed, _ = _probe(_settings(server.base_url))
    concurrency = fitted_evaluation(EvalConcurrency(), probed, lambda line: None)
    assert concurrency.in_flight > 24 > EvalConcurrency().in_flight
    with ScriptedServer(meet=24) as server:
        roles = RoleClients(LLMSettings(task={"base_url": server.base_url, "model": "scripted", "timeout_s": 60,
                                              "max_tokens": 16, "max_concurrency": None},
                                        embedding=EmbeddingConfig(kind="hashing")))
        report = evaluate(seed_source("vector_search"), task, roles.backend(), roles.embedder(), concurrency=concurrency)
    assert report.violation is None and server.met


@pytest.mark.slow
def test_a_real_llama_cpp_python_server_is_asked_and_gets_one_at_a_time(llm_server):
    config = EndpointConfig(base_url=llm_server.base_url, model=llm_server.model)
    learned = learn(config)
    assert learned.limit == 1 and "llama-cpp-python" in learned.source


def test_a_run_directory_keeps_what_the_run_learns_unset_and_what_the_user_set(tmp_path):
    """config.yaml must not turn a default into the user's choice: a resume (or a transfer) would then keep 16
    requests per evaluation and the hosted default where the server says it serves 256."""
    learned = RunConfig.model_validate({"llm": {"task": {"base_url": "http://127.0.0.1:8080/v1", "model": "m"}}})
    chosen = RunConfig.model_validate({"llm": {"task": {"base_url": "http://127.0.0.1:8080/v1", "model": "m",
                                                         "max_concurrency": 4}}, "evaluation": {"in_flight": 8}})
    for name, config in (("learned", learned), ("chosen", chosen)):
        RunDir(tmp_path / name).write_config(config)
    again = load_run_config(tmp_path / "learned" / layout.CONFIG)
    assert again == learned
    assert not again.llm.task.concurrency_set and "in_flight" not in again.evaluation.model_fields_set
    with ScriptedServer(get_json=VLLM) as server:
        probed, _ = _probe(again.llm.model_copy(update={"task": again.llm.task.model_copy(
            update={"base_url": server.base_url, "timeout_s": 30})}))
    assert fitted_evaluation(again.evaluation, probed, lambda line: None).in_flight == VLLM_MAX_NUM_SEQS
    kept = load_run_config(tmp_path / "chosen" / layout.CONFIG)
    assert kept.llm.task.max_concurrency == 4 and kept.llm.task.concurrency_set
    assert kept.evaluation.in_flight == 8 and fitted_evaluation(kept.evaluation, probed, lambda line: None).in_flight == 8
