"""A llama.cpp server keeps no candidate's prompt for another to time: against the real server, a candidate's
request after anyone else's reuses the same part of its prompt whatever came before, counted in the server's
own log (the tokens it evaluated, not the time it took); as a replica the run serves (the slot guard) and as an
endpoint the run reaches directly (its clients clear the slot under the run's limit of one)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from mstar_ray.llm.candidate_cache import CandidateBudget
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig
from mstar_ray.llm.governor import Governor
from mstar_ray.llm.limits import EndpointLimit
from mstar_ray.llm.parallelism import learn
from mstar_ray.serve.slot_guard import SlotGuard
from scripts.bench_prompt_cache_channel import long_prompt
from tests.llm_server import LlamaServer
from tests.scripted_server import ScriptedServer


def _prompt() -> list[dict[str, str]]:
    return long_prompt(30)


async def _reused(server: LlamaServer, guard: SlotGuard | None, http: httpx.AsyncClient,
                  sends: list[tuple[str | None, list[dict[str, str]]]]) -> tuple[int, int]:
    """Sends each (caller, messages) in turn, through ``guard`` if given; of the last's prompt tokens, how many
    the server reused from the state before it, and how many there were."""
    for i, (caller, messages) in enumerate(sends):
        seen = server.log_length()
        body = {"model": server.model, "messages": messages, "max_tokens": 1, "temperature": 0.0}
        if guard is None:
            reply = await http.post("/v1/chat/completions", json=body)
        else:
            async with guard.turn(caller):
                reply = await http.post("/v1/chat/completions", json=body)
        reply.raise_for_status()
        if i == len(sends) - 1:
            tokens: int = reply.json()["usage"]["prompt_tokens"]
            return tokens - server.evaluated_since(seen, tokens), tokens
    raise ValueError("nothing sent")


@pytest.mark.slow
def test_a_probe_evaluates_the_same_whatever_another_caller_sent_before(llm_server: LlamaServer) -> None:
    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=llm_server.base_url.removesuffix("/v1"), timeout=300) as http:
            planted = _prompt()
            # Reached directly, the server gives the channel away: it reuses all of a planted prompt.
            reused, tokens = await _reused(llm_server, None, http, [("a", planted), ("b", planted)])
            assert reused == tokens
            fresh_reused, _ = await _reused(llm_server, None, http, [("a", _prompt()), ("b", _prompt())])
            assert fresh_reused < tokens / 4

            guard = SlotGuard(http, llm_server.model)
            planted = _prompt()
            after_plant = await _reused(llm_server, guard, http, [("a", planted), ("b", planted)])
            after_other = await _reused(llm_server, guard, http, [("a", _prompt()), ("b", _prompt())])
            # after the host, too: its request may hold another candidate's prompt
            host_planted = _prompt()
            after_host = await _reused(llm_server, guard, http, [(None, host_planted), ("b", host_planted)])
            assert after_plant[0] == after_other[0] == after_host[0] < after_plant[1] / 4
            clears = guard.clears
            # a caller's own prompt stays its own to reuse, and the host is never held up by a clear
            own = _prompt()
            for second in (None, "b"):
                reused, tokens = await _reused(llm_server, guard, http, [("b", own), (second, own)])
                assert reused == tokens
            assert guard.clears == clears + 1  # the first ("b" after the host) only

    asyncio.run(scenario())


@pytest.mark.slow
def test_a_direct_endpoint_is_cleared_between_candidates_by_the_runs_clients(llm_server: LlamaServer) -> None:
    config = EndpointConfig(base_url=llm_server.base_url, model=llm_server.model, max_tokens=1, timeout_s=300)
    learned = learn(config)
    assert learned.limit == 1 and learned.clears_slot  # llama-cpp-python: one request at a time, prompts reused
    config = config.with_in_flight(learned.limit, learned.source, learned.clears_slot)
    gateway = Governor(limits={config.endpoint_key: EndpointLimit(max_concurrency=1)})
    client = LLMClient(ChatEndpoint("toolkit", config), gateway=gateway)

    def reused(sends: list[tuple[str | None, list[dict[str, str]]]]) -> tuple[int, int]:
        for caller, messages in sends:
            seen = llm_server.log_length()
            budget = CandidateBudget(caller, 2**20) if caller is not None else None
            tokens = client.complete(messages, step="toolkit" if caller else "answer", budget=budget).prompt_tokens
        return tokens - llm_server.evaluated_since(seen, tokens), tokens

    planted = _prompt()
    after_plant = reused([("a", planted), ("b", planted)])
    after_other = reused([("a", _prompt()), ("b", _prompt())])
    host_planted = _prompt()
    after_host = reused([(None, host_planted), ("b", host_planted)])
    assert after_plant[0] == after_other[0] == after_host[0] < after_plant[1] / 4
    own = _prompt()
    reused_own, tokens = reused([("b", own), ("b", own)])
    assert reused_own == tokens  # a candidate's own prompt stays its own to reuse
    # a user's own limit keeps the order of requests out of the run's hands: nothing is cleared then
    assert not EndpointConfig(base_url=llm_server.base_url, model=llm_server.model, max_concurrency=1).with_in_flight(
        1, "learned", True).clears_slot


def test_a_toolkit_request_names_its_candidate_and_the_hosts_names_none() -> None:
    with ScriptedServer(reply="ok") as server:
        client = LLMClient(ChatEndpoint("toolkit", EndpointConfig(base_url=server.base_url, model="m")))
        budget = CandidateBudget("program-1234", 2**20)
        client.complete([{"role": "user", "content": "for the candidate"}], step="toolkit", budget=budget)
        client.complete([{"role": "user", "content": "for the host"}], step="answer")
    assert server.callers == ["program-1234", None]
