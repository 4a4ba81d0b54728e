"""Before any evaluation: is each endpoint up, and how long may one of its requests take.

A server can be *unreachable* (nothing listens, the name does not resolve: an error at once, saying which)
or *busy*: it accepts the connection but answers nothing, as a single-slot llama.cpp server does while it
finishes a request of a run that was just killed. A busy server is asked again, with a message every
``PING_S`` seconds, until it answers or ``busy_wait_s`` has passed.

A role without ``timeout_s`` gets one from the endpoint's measured speed: two small requests give its
prompt and generation speeds (tokens per second), and the timeout is ``SAFETY`` times the time a typical
request of that role would take at those speeds (its prompt and its ``max_tokens``), kept within
[``FLOOR_S``, ``CAP_S``]. A small model on a busy 2-core machine gets minutes where a hosted API gets
its floor; one constant fits neither.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from pydantic import BaseModel

from mstar_ray.llm.endpoint import PING_S, UNMEASURED_TIMEOUT_S, CallFailure, ChatEndpoint, EndpointConfig
from mstar_ray.llm.endpoint import Completion
from mstar_ray.llm.errors import EndpointError
from mstar_ray.llm.settings import ReflectorConfig

SAFETY = 3.0
FLOOR_S = 30.0
CAP_S = 1800.0
# The prompt of a typical task-agent or judge request (an instruction and up to 3,000 characters of
# memory); a reflector's is its context less its reply, when the context is known.
TYPICAL_PROMPT_TOKENS = 1500
REFLECTOR_PROMPT_TOKENS = 4000
_FILLER = ("Memory programs store what an agent reads and return what it needs to answer later questions. ")
_SPEED_PROMPT = _FILLER * 20
SPEED_PROMPT_TOKENS = 300  # about, for the speed prompt
COUNT_TOKENS = 48
_COUNT_PROMPT = "Count from 1 to 60, the numbers separated by spaces, and nothing else."

Say = Callable[[str], None]


class Speed(BaseModel):
    prompt_tps: float  # prompt tokens processed per second
    generation_tps: float  # tokens generated per second


def wait_until_ready(endpoint: ChatEndpoint, say: Say) -> float:
    """Seconds waited until ``endpoint`` answered; raises ``EndpointError`` when it is unreachable, or
    still busy after its ``busy_wait_s``."""
    started = time.monotonic()
    limit = endpoint.config.busy_wait_s
    while not endpoint.ping(min(PING_S, max(limit - (time.monotonic() - started), 1.0))):
        waited = time.monotonic() - started
        if waited >= limit:
            raise EndpointError(
                f"{endpoint.where()} is busy: it accepts connections but answered nothing in {waited:.0f} s (still "
                f"working on an earlier request, e.g. of a run that was killed?). Wait for it, or raise busy_wait_s "
                f"(now {limit:g} s)")
        say(f"{endpoint.where()} is busy (connected, no answer for {waited:.0f} s; an earlier request still "
            f"running?): waiting up to {limit - waited:.0f} s more")
    return time.monotonic() - started


def measure_speed(endpoint: ChatEndpoint, say: Say) -> Speed | None:
    """Prompt and generation speed from two small requests (unique prompts, so no prefix cache answers);
    a check that times out gives the speeds it could not reach (so the timeout goes to its cap), and one
    that fails otherwise in a way a retry could cure gives None, said (the run's retries will meet it).
    Raises ``EndpointError`` when the endpoint refuses it for good (e.g. an unknown model)."""
    nonce = uuid.uuid4().hex[:8]
    timeout = max(endpoint.config.busy_wait_s, CAP_S / 6)
    try:
        long = _timed(endpoint, f"[{nonce}] {_SPEED_PROMPT}\nReply with one word.", 1, timeout)
        prompt_tps = max(long.prompt_tokens, 1) / max(long.seconds, 1e-3)
        short = _timed(endpoint, f"[{nonce}] {_COUNT_PROMPT}", COUNT_TOKENS, timeout)
    except CallFailure as failure:
        if not failure.retryable:
            raise EndpointError(f"{endpoint.where()} refused the speed check: {failure}") from None
        say(f"{endpoint.where()}: the speed check failed ({failure})")
        if failure.timed_out:  # slower than the check could see (a server shared with other clients)
            return Speed(prompt_tps=SPEED_PROMPT_TOKENS / timeout, generation_tps=COUNT_TOKENS / timeout)
        return None
    generating = max(short.seconds - short.prompt_tokens / prompt_tps, 1e-3)
    return Speed(prompt_tps=prompt_tps, generation_tps=max(short.completion_tokens, 1) / generating)


def _timed(endpoint: ChatEndpoint, prompt: str, max_tokens: int, timeout_s: float) -> Completion:
    body = endpoint.payload([{"role": "user", "content": prompt}], max_tokens=max_tokens)
    body["temperature"] = 0.0
    return endpoint.send(body, timeout_s=timeout_s)


def typical_prompt_tokens(config: EndpointConfig) -> int:
    if isinstance(config, ReflectorConfig):
        context = config.context_tokens
        return max(context - config.max_tokens, TYPICAL_PROMPT_TOKENS) if context else REFLECTOR_PROMPT_TOKENS
    return TYPICAL_PROMPT_TOKENS


def timeout_for(config: EndpointConfig, speed: Speed | None) -> float:
    """``SAFETY`` x (a typical prompt at the prompt speed + ``max_tokens`` at the generation speed), kept
    within [FLOOR_S, CAP_S], in whole seconds; the unmeasured default without a speed."""
    if speed is None:
        return UNMEASURED_TIMEOUT_S
    expected = typical_prompt_tokens(config) / speed.prompt_tps + config.max_tokens / speed.generation_tps
    return float(round(min(max(SAFETY * expected, FLOOR_S), CAP_S)))
