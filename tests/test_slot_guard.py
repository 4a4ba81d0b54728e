"""A served llama.cpp replica keeps one candidate from timing another's prompts: against the real server, a
candidate's request after anyone else's evaluates its whole prompt whatever came before, counted in the
server's own log (the tokens it evaluated, not the time it took)."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from mstar_ray.llm.candidate_cache import CandidateBudget
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig
from mstar_ray.serve.slot_guard import SlotGuard
from tests.llm_server import LlamaServer
from tests.scripted_server import ScriptedServer


def _prompt() -> list[dict[str, str]]:
    text = f"{uuid.uuid4().hex[:8]}: " + " ".join(f"item{j}" for j in range(30))
    return [{"role": "user", "content": f"{text}\nReply with one word."}]


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


def test_a_toolkit_request_names_its_candidate_and_the_hosts_names_none() -> None:
    with ScriptedServer(reply="ok") as server:
        client = LLMClient(ChatEndpoint("toolkit", EndpointConfig(base_url=server.base_url, model="m")))
        budget = CandidateBudget("program-1234", 2**20)
        client.complete([{"role": "user", "content": "for the candidate"}], step="toolkit", budget=budget)
        client.complete([{"role": "user", "content": "for the host"}], step="answer")
    assert server.callers == ["program-1234", None]
