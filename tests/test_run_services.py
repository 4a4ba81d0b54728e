"""The run's cache and gateway on a real (simulated two-node) Ray cluster: what a worker on one node
writes, a worker on the other node reads; a concurrency limit holds across tasks on both nodes."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from mstar_ray.actors.run_services import start_run_services  # noqa: E402
from mstar_ray.llm.endpoint import EndpointConfig  # noqa: E402
from mstar_ray.llm.settings import LLMSettings  # noqa: E402
from tests.scripted_server import ScriptedServer  # noqa: E402


@pytest.fixture(scope="module")
def two_nodes():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"head": 1}})
    worker = cluster.add_node(num_cpus=2, resources={"worker": 1})
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    cluster.wait_for_nodes()
    yield cluster, worker
    ray.shutdown()
    cluster.shutdown()


def on(node_id: str) -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


@ray.remote(num_cpus=1)
def embed_on_a_worker(cache, texts: list[str]) -> tuple[str, int, int]:
    from mstar_ray.embedding.hashing import HashingEmbedder
    from mstar_ray.embedding.cached import CachedEmbedder

    embedder = CachedEmbedder(HashingEmbedder(), cache)
    embedder.embed(texts)
    usage = embedder.usage()
    return ray.get_runtime_context().get_node_id(), usage.requests, usage.cache_hits


@ray.remote(num_cpus=0.25)
def ask(url: str, gateway, i: int, cache=None) -> bool:
    from mstar_ray.llm.client import LLMClient
    from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig

    config = EndpointConfig(base_url=url, model="scripted", max_concurrency=2)
    client = LLMClient(ChatEndpoint("task", config), gateway=gateway, cache=cache)
    return client.complete([{"role": "user", "content": f"q{i}"}], step="answer").cached


def test_a_worker_on_another_node_hits_what_one_node_wrote(two_nodes, tmp_path):
    cluster, worker = two_nodes
    cache, _ = start_run_services(tmp_path, LLMSettings())
    head_id = cluster.head_node.node_id
    texts = ["Ana moved to Lisbon in May.", "Bo adopted a dog called Rex.", "Ana moved to Lisbon in May."]
    node_a, requests, hits = ray.get(embed_on_a_worker.options(scheduling_strategy=on(worker.node_id)).remote(cache, texts))
    assert (node_a, requests, hits) == (worker.node_id, 3, 1)  # the repeated text is embedded once
    node_b, requests, hits = ray.get(embed_on_a_worker.options(
        scheduling_strategy=on(head_id), num_cpus=0).remote(cache, texts + ["A new text."]))
    assert node_b == head_id != node_a
    assert (requests, hits) == (4, 3)
    assert (tmp_path / "cache.sqlite").exists()  # the file lives with the driver


def test_the_concurrency_limit_holds_across_nodes(two_nodes, tmp_path):
    cluster, worker = two_nodes
    # The first two requests are held until both are in flight (on a busy machine the tasks may otherwise never
    # overlap); the rest keep a latency so that a third admitted beside them would be seen.
    with ScriptedServer(latency_s=0.3, meet=2) as server:
        config = EndpointConfig(base_url=server.base_url, model="scripted", max_concurrency=2)
        _, gateway = start_run_services(tmp_path, LLMSettings(task=config))
        nodes = [worker.node_id, cluster.head_node.node_id]
        ray.get([ask.options(scheduling_strategy=on(nodes[i % 2])).remote(server.base_url, gateway, i) for i in range(8)])
        assert server.met and server.requests == 8 and server.max_in_flight == 2
        assert gateway.snapshot().by_role["task"].calls == 8


def test_one_request_asked_on_both_nodes_at_once_is_sent_once(two_nodes, tmp_path):
    cluster, worker = two_nodes
    with ScriptedServer(latency_s=2.0) as server:  # long enough for the four tasks to overlap
        cache, gateway = start_run_services(tmp_path, LLMSettings())
        nodes = [worker.node_id, cluster.head_node.node_id]
        cached = ray.get([ask.options(scheduling_strategy=on(nodes[i % 2])).remote(server.base_url, gateway, 0, cache)
                          for i in range(4)])
        assert server.requests == 1 and sorted(cached) == [False, True, True, True]
