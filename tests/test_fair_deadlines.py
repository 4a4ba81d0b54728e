"""No candidate pays for another's load (issue 40, item 3): a toolkit request that waits for a shared endpoint's
slot behind someone else's request does not spend the waiting program's deadline; the program is frozen while it
waits, so the excused time buys it no work; and one program holds at most one of the endpoint's slots at a time.
Real parts throughout: a scripted HTTP server, the run's gateway with one slot, a real client, a real sandbox.
The hog holds the slot until the test lets it go, never for a set time, so a slow machine cannot change an
outcome: it can only lengthen a wait the test has already made longer than the deadline."""

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
DEADLINE_S = 1.5  # the neighbour's own deadline: far longer than its own work
HANG_S = 300.0  # a bound for a hang only: the hog is always let go well before


class _CountingGateway(Governor):
    """The run's gateway, counting the admissions asked for: the hog asks first, the neighbour second."""

    def __init__(self, limits):
        super().__init__(limits)
        self.asked = 0
        self.neighbour_waits = threading.Event()

    def admit_waiting(self, endpoint, hold_s, caller=None):
        self.asked += 1
        if self.asked == 2:  # the hog holds the only slot: the neighbour's first ask finds it taken
            self.neighbour_waits.set()
        return super().admit_waiting(endpoint, hold_s, caller)


def _neighbour_reads_behind_a_hog(limits: SandboxLimits, *, release_after_s: float | None):
    """The neighbour's read while the hog holds the endpoint's only slot. The hog is let go ``release_after_s``
    after the neighbour started waiting for the slot, or (None) only once the neighbour's read is over."""
    release = threading.Event()

    def held(messages):
        if "hog" in messages[-1]["content"]:
            release.wait(HANG_S)
        return 0.0

    with ScriptedServer(latency_for=held, reply="answered") as server:
        config = EndpointConfig(base_url=server.base_url, model="scripted", max_concurrency=1, timeout_s=HANG_S,
                                max_retries=0)
        gateway = _CountingGateway({config.endpoint_key: EndpointLimit(max_concurrency=1)})
        client = LLMClient(ChatEndpoint("toolkit", config), cache=MemoryCache(), gateway=gateway)
        hog = threading.Thread(target=lambda: client.complete([{"role": "user", "content": "hog"}], step="hog"))

        def let_go_after_the_neighbour_waited() -> None:
            if gateway.neighbour_waits.wait(HANG_S):
                threading.Event().wait(release_after_s)
            release.set()

        try:
            with Sandbox(ASKS, limits=limits, llm=lambda messages: client.complete(messages, step="t").text) as sandbox:
                assert sandbox.start().ok
                hog.start()
                while server.in_flight == 0:  # the hog holds the slot before the neighbour asks
                    threading.Event().wait(0.01)
                if release_after_s is not None:
                    threading.Thread(target=let_go_after_the_neighbour_waited, daemon=True).start()
                outcome = sandbox.read({"text": "q"})
                reached = server.requests  # requests at the server when the read was over
        finally:
            release.set()
            hog.join()
        return outcome, reached, server, gateway


def test_time_queued_behind_another_request_is_not_the_programs():
    # the slot is freed only once the neighbour has waited twice its whole deadline for it
    outcome, reached, server, gateway = _neighbour_reads_behind_a_hog(SandboxLimits(call_timeout_s=DEADLINE_S),
                                                                      release_after_s=2 * DEADLINE_S)
    assert outcome.ok, outcome.describe()
    assert outcome.value == "answered"
    assert outcome.queued_seconds > DEADLINE_S  # it waited longer than its whole deadline, and was not charged
    assert reached == 2 and server.max_in_flight == 1  # the slot held: one at a time
    assert gateway.asked >= 2  # the neighbour asked for the slot while the hog held it


def test_the_excused_wait_is_bounded():
    """Past ``queued_max_s`` the wait counts again: a stuck endpoint cannot hold a call open for ever."""
    outcome, reached, _, _ = _neighbour_reads_behind_a_hog(SandboxLimits(call_timeout_s=DEADLINE_S, queued_max_s=0.0),
                                                           release_after_s=None)
    assert outcome.kind == "timeout"
    assert reached == 1  # the slot was never free while it waited: only the hog had reached the server


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
