"""The timing channel between candidates through a model server's prompt-prefix reuse, measured against the
real local llama.cpp server (``tests/llm_server.py``: llama-cpp-python on SmolLM2-135M, one slot), as it is
reached directly and as a replica the run serves reaches it (through ``mstar_ray.serve.slot_guard``).

llama-cpp-python keeps the key/value state of the last prompt it evaluated and reuses its longest common
prefix with the next one (``Llama.generate``: "N prefix-match hit"). So a candidate that sends a long
prompt another candidate (or the host, for another candidate) sent just before may get its reply sooner.

Per round: a planter sends a long prompt of its own; then a prober sends either that same prompt (planted) or
a fresh one of the same shape (unplanted), one token each, and its request is timed (with the guard, the time
includes the slot's clear, as the prober sees it). The server's own log says how many prompt tokens each
request evaluated; the rest it reused (counted, not timed). planted/unplanted far below 1 says the prober can
tell what was sent before it; about 1, that it cannot.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/bench_prompt_cache_channel.py [--rounds 5] [--words 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from contextlib import nullcontext
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.serve.slot_guard import SlotGuard  # noqa: E402
from tests.llm_server import LlamaServer  # noqa: E402


def long_prompt(words: int) -> list[dict[str, str]]:
    """A prompt of ``words`` words, its own from its first (a tag): nothing shared with another but the template."""
    text = f"{uuid.uuid4().hex[:8]}: " + " ".join(f"item{j}" for j in range(words))
    return [{"role": "user", "content": f"{text}\nReply with one word."}]


async def probe_rounds(server: LlamaServer, guard: SlotGuard | None, rounds: int, words: int,
                       http: httpx.AsyncClient) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    async def send(caller: str, messages: list[dict[str, str]]) -> int:
        body = {"model": server.model, "messages": messages, "max_tokens": 1, "temperature": 0.0}
        async with guard.turn(caller) if guard is not None else nullcontext():
            reply = await http.post("/v1/chat/completions", json=body)
        reply.raise_for_status()
        tokens: int = reply.json()["usage"]["prompt_tokens"]
        return tokens

    times: dict[str, list[float]] = {"planted": [], "unplanted": []}
    counted: dict[str, list[int]] = {"planted": [], "unplanted": []}
    for _ in range(rounds):
        for kind in ("planted", "unplanted"):  # interleaved, so a busy machine slows both alike
            planted = long_prompt(words)
            await send("planter", planted)
            seen = server.log_length()
            started = time.monotonic()
            tokens = await send("prober", planted if kind == "planted" else long_prompt(words))
            times[kind].append(time.monotonic() - started)
            counted[kind].append(server.evaluated_since(seen, tokens))
    return times, counted


async def measure(server: LlamaServer, rounds: int, words: int) -> None:
    async with httpx.AsyncClient(base_url=server.base_url.removesuffix("/v1"), timeout=600) as http:
        await probe_rounds(server, None, 1, 20, http)  # warm up
        print(f"llama.cpp (llama-cpp-python) SmolLM2-135M, {words}-word prompts, {rounds} rounds")
        print("| server reached | probe | seconds per round | prompt tokens the server evaluated per round |")
        print("|---|---|---|---|")
        medians = {}
        for name, guard in (("directly", None), ("through the slot guard", SlotGuard(http, server.model))):
            times, counted = await probe_rounds(server, guard, rounds, words, http)
            for kind in times:
                print(f"| {name} | {kind} | {', '.join(f'{t:.3f}' for t in times[kind])} | "
                      f"{', '.join(map(str, counted[kind]))} |")
            medians[name] = statistics.median(p / u for p, u in zip(times["planted"], times["unplanted"]))
        print("planted/unplanted, median of the rounds: "
              + "; ".join(f"{name} {ratio:.3g}" for name, ratio in medians.items()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--words", type=int, default=300)
    args = parser.parse_args()
    with LlamaServer(n_ctx=4096, ready_timeout=600) as server:
        asyncio.run(measure(server, args.rounds, args.words))


if __name__ == "__main__":
    main()
