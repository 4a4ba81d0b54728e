"""No candidate pays for another's load (issue 40, item 3): a toolkit request that waits for a shared endpoint's
slot behind someone else's request does not spend the waiting program's deadline; the program is frozen while it
waits, so the excused time buys it no work; and one program holds at most one of the endpoint's slots at a time.
Real parts throughout: a scripted HTTP server, the run's gateway with one slot, a real client, a real sandbox.
The checks are outcomes and counts, not durations."""

from __future__ import annotations

import threading

from mstar_ray.llm.cache import MemoryCache
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig
from mstar_ray.llm.governor import Governor
from mstar_ray.llm.limits import EndpointLimit
from mstar_ray.sandbox_host.process import Sandbox
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from mstar_ray.llm.waiting import WaitClock, charged_to, queued
from tests.scripted_server import ScriptedServer

ASKS = '''
from dataclasses import dataclass
INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""
@dataclass
class KnowledgeItem:
    text: str
@dataclass
class Query:
    text: str
class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
    def write(self, item, raw_text):
        pass
    def read(self, query):
        return self.toolkit.llm_completion("neighbour: " + query.text)
'''
HOG_S = 4.0  # the attacker's request holds the endpoint's only slot this long
DEADLINE_S = 1.5  # the neighbour's own deadline: far shorter than the hog, far longer than its own work


def _slow_for_hog(messages):
    return HOG_S if "hog" in messages[-1]["content"] else 0.0


def _neighbour_reads_behind_a_hog(limits: SandboxLimits):
    with ScriptedServer(latency_for=_slow_for_hog, reply="answered") as server:
        config = EndpointConfig(base_url=server.base_url, model="scripted", max_concurrency=1, timeout_s=30,
                                max_retries=0)
        gateway = Governor({config.endpoint_key: EndpointLimit(max_concurrency=1)})
        client = LLMClient(ChatEndpoint("toolkit", config), cache=MemoryCache(), gateway=gateway)
        hog = threading.Thread(target=lambda: client.complete([{"role": "user", "content": "hog"}], step="hog"))
        with Sandbox(ASKS, limits=limits, llm=lambda messages: client.complete(messages, step="t").text) as sandbox:
            assert sandbox.start().ok
            hog.start()
            while server.in_flight == 0:  # the hog holds the slot before the neighbour asks
                threading.Event().wait(0.01)
            outcome = sandbox.read({"text": "q"})
        hog.join()
        return outcome, server


def test_time_queued_behind_another_request_is_not_the_programs():
    outcome, server = _neighbour_reads_behind_a_hog(SandboxLimits(call_timeout_s=DEADLINE_S))
    assert outcome.ok, outcome.describe()
    assert outcome.value == "answered"
    assert outcome.queued_seconds > DEADLINE_S  # it waited longer than its whole deadline, and was not charged
    assert server.requests == 2 and server.max_in_flight == 1  # the slot held: one at a time


def test_the_excused_wait_is_bounded():
    """Past ``queued_max_s`` the wait counts again: a stuck endpoint cannot hold a call open for ever."""
    outcome, _ = _neighbour_reads_behind_a_hog(SandboxLimits(call_timeout_s=DEADLINE_S, queued_max_s=0.0))
    assert outcome.kind == "timeout"


def test_a_wait_counts_on_the_clock_of_the_thread_that_waits_only():
    clock, other = WaitClock(), WaitClock()
    with charged_to(clock):
        with queued():
            threading.Event().wait(0.01)
            with queued():  # nested: counted once
                pass
        assert clock.seconds > 0
    with queued():  # no clock on this thread: nothing counts
        pass
    seen = clock.seconds
    thread = threading.Thread(target=lambda: charged_to(other).__enter__())
    thread.start()
    thread.join()
    assert clock.seconds == seen and other.seconds == 0.0
