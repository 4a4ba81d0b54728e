"""The start-up check of an endpoint (issue 15, items 5 and 6): a closed port is refused at once and the
error says so; a server that accepts the connection but answers nothing is busy, is waited for within
``busy_wait_s`` with a message each time, and the error says it was busy; each role's timeout comes from
the endpoint's measured speed unless the config sets one."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from mstar_ray.actors.wiring import probe_endpoints
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig
from mstar_ray.llm.errors import EndpointError
from mstar_ray.llm.probe import CAP_S, FLOOR_S, Speed, timeout_for, wait_until_ready
from mstar_ray.llm.settings import LLMSettings, ReflectorConfig
from tests.llm_server import free_port
from tests.scripted_server import ScriptedServer


class SilentServer:
    """A real listening socket that accepts connections and never answers: what a single-slot server busy
    with a long request looks like from outside."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def close(self) -> None:
        self.sock.close()


def test_a_closed_port_is_refused_at_once_and_said_so():
    endpoint = ChatEndpoint("reflector", EndpointConfig(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m"))
    said: list[str] = []
    with pytest.raises(EndpointError) as caught:
        wait_until_ready(endpoint, said.append)
    assert "role 'reflector'" in str(caught.value) and "unreachable" in str(caught.value)
    assert "connection refused" in str(caught.value) and "busy" not in str(caught.value)
    assert said == []  # refused at the first ping: no round of waiting for a busy server


def test_a_server_that_accepts_but_does_not_answer_is_busy_and_waited_for_within_the_bound(monkeypatch):
    import mstar_ray.llm.probe as probe

    monkeypatch.setattr(probe, "PING_S", 0.5)
    silent = SilentServer()
    said: list[str] = []
    try:
        endpoint = ChatEndpoint("reflector", EndpointConfig(base_url=silent.base_url, model="m", busy_wait_s=2))
        with pytest.raises(EndpointError) as caught:
            wait_until_ready(endpoint, said.append)
    finally:
        silent.close()
    message = str(caught.value)
    assert "is busy" in message and "unreachable" not in message and "busy_wait_s" in message
    assert said and all("is busy" in line and "waiting up to" in line for line in said)


def test_the_timeout_follows_the_speed_within_its_floor_and_cap():
    task = EndpointConfig(base_url="http://x/v1", model="m", max_tokens=128)
    slow, fast = Speed(prompt_tps=20, generation_tps=5), Speed(prompt_tps=5000, generation_tps=200)
    assert timeout_for(task, slow) == round(3 * (1500 / 20 + 128 / 5))
    assert timeout_for(task, fast) == FLOOR_S
    assert timeout_for(task, Speed(prompt_tps=1, generation_tps=0.1)) == CAP_S
    reflector = ReflectorConfig(base_url="http://x/v1", model="m", max_tokens=768, context_tokens=8192)
    assert timeout_for(reflector, slow) == round(3 * ((8192 - 768) / 20 + 768 / 5))


def test_probing_fills_unset_timeouts_from_the_measured_speed_and_keeps_set_ones():
    with ScriptedServer(latency_s=0.2) as server:
        settings = LLMSettings(task={"base_url": server.base_url, "model": "scripted", "max_tokens": 64},
                               judge={"base_url": server.base_url, "model": "judge", "timeout_s": 42})
        said: list[str] = []
        probed = probe_endpoints(settings, said.append)
    assert probed.task.timeout_s is not None and FLOOR_S <= probed.task.timeout_s <= CAP_S
    assert probed.endpoints()["toolkit"].timeout_s == probed.task.timeout_s  # the toolkit falls back to the task
    assert probed.judge.timeout_s == 42 and settings.task.timeout_s is None  # the config itself is unchanged
    assert any("role 'task'" in line and "tokens/s generated" in line and "-> timeout" in line for line in said)
    assert any("role 'judge'" in line and "timeout 42 s per request (from the config)" in line for line in said)


def test_a_speed_check_that_meets_a_429_falls_back_to_the_default_timeout():
    with ScriptedServer() as server:
        server.fail_next(1, 429)
        said: list[str] = []
        probed = probe_endpoints(LLMSettings(task={"base_url": server.base_url, "model": "m"}), said.append)
    assert probed.task.timeout_s == 60 and any("speed check failed" in line for line in said)


@pytest.mark.slow
def test_a_real_server_busy_with_a_long_request_is_told_apart_and_waited_for(llm_server_factory):
    server = llm_server_factory()
    config = EndpointConfig(base_url=server.base_url, model=server.model, busy_wait_s=600, timeout_s=600)
    endpoint = ChatEndpoint("reflector", config)
    assert endpoint.ping()
    body = endpoint.payload([{"role": "user", "content": "Write a long story about a lighthouse keeper."}], max_tokens=600)
    body["temperature"] = 0.0
    long = threading.Thread(target=endpoint.send, args=(body,), daemon=True)
    long.start()
    time.sleep(1.0)
    assert endpoint.ping(1.0) is False  # connected, no answer: busy, not unreachable
    said: list[str] = []
    waited = wait_until_ready(endpoint, said.append)  # returns once the long request is done
    long.join(timeout=600)
    assert waited > 0 and endpoint.ping()
    probed = probe_endpoints(LLMSettings(task={"base_url": server.base_url, "model": server.model, "max_tokens": 64}),
                             said.append)
    assert FLOOR_S <= probed.task.timeout_s <= CAP_S
    assert any("tokens/s generated" in line for line in said)


def test_a_speed_check_that_times_out_sets_the_timeout_to_its_cap(monkeypatch):
    import mstar_ray.llm.probe as probe

    monkeypatch.setattr(probe, "CAP_S", 12)  # the check waits max(busy_wait_s, CAP_S / 6) = 2 s
    with ScriptedServer(latency_s=3) as server:
        said: list[str] = []
        config = {"base_url": server.base_url, "model": "m", "busy_wait_s": 1}
        probed = probe_endpoints(LLMSettings(task=config), said.append)
    assert probed.task.timeout_s == 12 and any("speed check failed (timed out" in line for line in said)
