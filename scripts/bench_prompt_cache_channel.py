"""The timing channel between candidates through a model server's prompt-prefix reuse, measured against the
real local llama.cpp server (``tests/llm_server.py``: llama-cpp-python on SmolLM2-135M, one slot).

llama-cpp-python keeps the key/value state of the last prompt it evaluated and reuses its longest common
prefix with the next one (``Llama.generate``: "N prefix-match hit"). So a candidate that sends a long
prompt another candidate (or the host, for another candidate) sent just before may get its reply sooner.

Per round: a planter sends a long prompt of its own; then a prober sends either that same prompt (planted) or
a fresh one of the same shape (unplanted), one token each, and its request is timed. The server's own log
says how many prompt tokens each request evaluated; the rest it reused (counted, not timed).
planted/unplanted far below 1 says the prober can tell what was sent before it.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/bench_prompt_cache_channel.py [--rounds 5] [--words 300]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig  # noqa: E402
from tests.llm_server import LlamaServer  # noqa: E402

# What llama-cpp-python logs (verbose, its server's default) for each request that reuses the last prompt's state.
PARTLY = re.compile(r"Llama\.generate: \d+ prefix-match hit, remaining (\d+) prompt tokens to eval")
WHOLLY = "Llama.generate: full prompt already cached"


def long_prompt(words: int) -> list[dict[str, str]]:
    """A prompt of ``words`` words, its own from its first (a tag): nothing shared with another but the template."""
    text = f"{uuid.uuid4().hex[:8]}: " + " ".join(f"item{j}" for j in range(words))
    return [{"role": "user", "content": f"{text}\nReply with one word."}]


def evaluated(server: LlamaServer, seen: int, prompt_tokens: int) -> tuple[int, int]:
    """Prompt tokens the server evaluated for the one request logged after ``seen`` characters (the rest it
    reused), and the log's length now."""
    text = server.log_path.read_text(errors="replace") if server.log_path else ""
    new = text[seen:]
    partly = PARTLY.findall(new)
    count = 0 if WHOLLY in new else int(partly[-1]) if partly else prompt_tokens
    return count, len(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--words", type=int, default=300)
    args = parser.parse_args()
    with LlamaServer(n_ctx=4096, ready_timeout=600) as server:
        endpoint = ChatEndpoint("toolkit", EndpointConfig(base_url=server.base_url, model=server.model, max_tokens=1,
                                                          timeout_s=600))
        endpoint.send(endpoint.payload(long_prompt(20)))  # warm up
        times: dict[str, list[float]] = {"planted": [], "unplanted": []}
        counted: dict[str, list[int]] = {"planted": [], "unplanted": []}
        seen = evaluated(server, 0, 0)[1]
        for _ in range(args.rounds):
            for kind in ("planted", "unplanted"):  # interleaved, so a busy machine slows both alike
                planted = long_prompt(args.words)
                endpoint.send(endpoint.payload(planted))  # the planter
                seen = evaluated(server, 0, 0)[1]
                probe = planted if kind == "planted" else long_prompt(args.words)
                started = time.monotonic()
                reply = endpoint.send(endpoint.payload(probe))
                times[kind].append(time.monotonic() - started)
                count, seen = evaluated(server, seen, reply.prompt_tokens)
                counted[kind].append(count)
    ratios = [p / u for p, u in zip(times["planted"], times["unplanted"])]
    print(f"llama.cpp (llama-cpp-python) SmolLM2-135M, {args.words}-word prompts, {args.rounds} rounds")
    print("| probe | seconds per round | prompt tokens the server evaluated per round |")
    print("|---|---|---|")
    for kind in times:
        print(f"| {kind} | {', '.join(f'{t:.3f}' for t in times[kind])} | {', '.join(map(str, counted[kind]))} |")
    print(f"planted/unplanted per round: {', '.join(f'{r:.3g}' for r in ratios)}; "
          f"median {statistics.median(ratios):.3g}")


if __name__ == "__main__":
    main()
