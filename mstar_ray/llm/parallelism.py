"""How many requests a server answers at once, learned where it says so, for the run's in-flight limit.

A server that queues what it cannot serve makes every request past its parallelism wait inside it, where
the run cannot see or bound the wait; one that serves hundreds at once is throttled by a limit of one. So
before a run, each endpoint whose config sets no ``max_concurrency`` is asked:

- a llama.cpp server (``llama-server``): ``GET /props`` says ``total_slots`` (``--parallel``); ``GET /slots``
  lists them where ``/props`` is off;
- ``GET /v1/models``: a model ``owned_by`` vLLM serves its batch (``--max-num-seqs``, which it does not
  publish: its default is taken); SGLang says ``max_running_requests`` in ``GET /get_server_info``;
  llama-cpp-python's server (``owned_by: me``) answers one request at a time (it holds a lock per model);
- nothing said: the hosted default, or one for a server on this machine.

A model the run serves itself is not asked: its replicas and their ``max_ongoing_requests`` say it
(``EndpointConfig.at``).
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from mstar_ray.llm.endpoint import DEFAULT_MAX_CONCURRENCY, LOCAL_MAX_CONCURRENCY, EndpointConfig, on_this_machine

ASK_TIMEOUT_S = 5.0
VLLM_MAX_NUM_SEQS = 256  # vLLM's default --max-num-seqs: requests its scheduler runs at once
MAX_LEARNED = 1024  # a server claiming more is taken at this: the run's own threads are the bound past it
_CLEARED = "; its slot cleared before a candidate's request that follows another's"


class Parallelism(BaseModel):
    limit: int
    source: str  # what said so, for the run's first lines
    # A llama.cpp server with one slot reuses the last prompt's state for the next request, whoever sends it:
    # a candidate's request that follows another's is preceded by a clear (``EndpointConfig.clears_slot``).
    clears_slot: bool = False


def _root(base_url: str) -> str:
    """The server's own address: llama.cpp's /props and SGLang's /get_server_info sit beside /v1."""
    url = base_url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def _get(url: str, headers: dict[str, str]) -> Any:
    """The JSON a GET answers, or None for anything else (not found, not JSON, no answer in time)."""
    import httpx  # openai's own HTTP library, imported only when a run starts

    try:
        response = httpx.get(url, headers=headers, timeout=ASK_TIMEOUT_S)
        if response.status_code != 200:
            return None
        return response.json()
    except (httpx.HTTPError, ValueError):
        return None


def _positive(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return min(value, MAX_LEARNED)
    return None


def learn(config: EndpointConfig) -> Parallelism:
    """What ``config``'s server says it serves at once, or the default for where it is."""
    assert config.base_url is not None
    headers = {}
    if config.api_key_env and os.environ.get(config.api_key_env):
        headers["Authorization"] = f"Bearer {os.environ[config.api_key_env]}"
    root = _root(config.base_url)
    props = _get(f"{root}/props", headers)
    if isinstance(props, dict) and _positive(props.get("total_slots")):
        slots = _positive(props["total_slots"])
        return Parallelism(limit=slots, source=f"the llama.cpp server has {slots} slot(s) (/props total_slots)"
                           + (_CLEARED if slots == 1 else ""), clears_slot=slots == 1)
    slots_list = _get(f"{root}/slots", headers)
    if isinstance(slots_list, list) and slots_list and all(isinstance(s, dict) and "id" in s for s in slots_list):
        slots = min(len(slots_list), MAX_LEARNED)
        return Parallelism(limit=slots, source=f"the llama.cpp server has {slots} slot(s) (/slots)" + (_CLEARED if slots == 1 else ""),
                           clears_slot=slots == 1)
    models = _get(f"{config.base_url.rstrip('/')}/models", headers)
    owners = {str(m.get("owned_by")) for m in (models or {}).get("data", []) if isinstance(m, dict)} \
        if isinstance(models, dict) else set()
    if "vllm" in owners:
        return Parallelism(limit=VLLM_MAX_NUM_SEQS, source=f"a vLLM server (its default --max-num-seqs, "
                           f"{VLLM_MAX_NUM_SEQS}; it does not publish the value it runs with)")
    if "sglang" in owners:
        info = _get(f"{root}/get_server_info", headers)
        running = _positive(info.get("max_running_requests")) if isinstance(info, dict) else None
        if running:
            return Parallelism(limit=running, source=f"the SGLang server runs {running} at once "
                               "(/get_server_info max_running_requests)")
    if "me" in owners:
        return Parallelism(limit=1, source="a llama-cpp-python server (one request at a time)" + _CLEARED,
                           clears_slot=True)
    if on_this_machine(config.base_url):
        return Parallelism(limit=LOCAL_MAX_CONCURRENCY, source="a server on this machine that does not say how "
                           "many it serves at once")
    return Parallelism(limit=DEFAULT_MAX_CONCURRENCY, source="the default for a hosted endpoint")
