"""One llama.cpp slot that no caller can read another's prompts from.

llama-cpp-python keeps the state of the last prompt it evaluated and reuses its longest common prefix with the
next request, whoever sends it. So a candidate that sends a guess right after another candidate's request is
answered sooner the more of the guess the other sent (``scripts/bench_prompt_cache_channel.py`` measures it):
a timing channel between candidates. The guard serves the slot one request at a time and, before a
candidate's request follows anyone else's, evaluates a fixed prompt, so what that request reuses is the
same whoever came before. A candidate's requests that follow its own keep their reuse; the host's requests
(no caller named) are never delayed.

A candidate's requests name it in ``CALLER_HEADER`` (``mstar_ray.llm.endpoint``): the host's client sets it
from the program id of the candidate whose toolkit call it forwards. A one-slot llama.cpp server the run does
not serve gets the same clear from the run's clients (``EndpointConfig.clears_slot``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from mstar_ray.llm.endpoint import SLOT_CLEAR, clears_before


class SlotGuard:
    def __init__(self, server: httpx.AsyncClient, model: str):
        self._server = server
        self._model = model
        self._lock = asyncio.Lock()
        self._holder: str | None = None  # whose prompt the slot holds now: a caller, or None (the host, a clear)
        self.clears = 0

    @asynccontextmanager
    async def turn(self, caller: str | None) -> AsyncIterator[None]:
        """The slot, alone, for one request of ``caller`` (None: the host), cleared first when it holds
        another's prompt. A clear that fails fails this request (the client retries it): serving it would
        leave the channel open."""
        async with self._lock:
            if clears_before(caller, self._holder):
                self._holder = None  # a clear cut short leaves the slot in no caller's state
                await self._clear()
            self._holder = caller
            yield

    async def _clear(self) -> None:
        reply = await self._server.post("/v1/completions", json={**SLOT_CLEAR, "model": self._model})
        reply.raise_for_status()
        self.clears += 1
