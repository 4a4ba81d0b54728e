"""A chat call as the rest of the system sees it: cache first, then admission by the run-wide gateway,
one attempt at the endpoint, and retries with backoff on failures that a retry can cure.

Every request is counted by step (extract, query, answer, toolkit, reflect, judge...) so a report can
say how many calls were new and how many the cache answered.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from mstar_ray.llm.cache import CacheStore, request_key
from mstar_ray.llm.candidate_cache import CandidateBudget
from mstar_ray.llm.endpoint import CallFailure, ChatEndpoint, Completion
from mstar_ray.llm.errors import EndpointError, RequestRefused
from mstar_ray.llm.governor import Gateway, Governor, admitted
from mstar_ray.llm.retry import RetryPolicy
from mstar_ray.llm.usage import CallLog, StepUsage
from mstar_ray.llm.waiting import queued

log = logging.getLogger("mstar_ray.llm")

# How often a caller whose request another caller is already sending looks for its reply: soon at first (a
# short request), then less often, so many waiters do not flood the run's cache.
FIRST_LOOK_S = 0.02
LOOK_EVERY_S = 0.5


class LLMClient:
    def __init__(
        self,
        endpoint: ChatEndpoint,
        *,
        cache: CacheStore | None = None,
        gateway: Gateway | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ):
        self.endpoint = endpoint
        self.cache = cache
        self.gateway = gateway or Governor()
        self.retry = retry or RetryPolicy(max_retries=endpoint.config.max_retries)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._usage: dict[str, StepUsage] = {}
        self._calls: list[CallLog] = []

    @property
    def role(self) -> str:
        return self.endpoint.role

    @property
    def model(self) -> str:
        model = self.endpoint.config.model
        assert model is not None  # EndpointConfig's validator sets it (from served, or required with base_url)
        return model

    def usage(self) -> dict[str, StepUsage]:
        with self._lock:
            return {step: u.model_copy() for step, u in self._usage.items()}

    def drain_calls(self) -> list[CallLog]:
        """The requests made since the last drain, oldest first (the evaluator ships them to the log)."""
        with self._lock:
            calls, self._calls = self._calls, []
        return calls

    def complete(
        self, messages: list[dict[str, Any]], *, step: str, json_mode: bool = False, max_tokens: int | None = None,
        budget: CandidateBudget | None = None, tools: list[dict[str, Any]] | None = None, tool_choice: str | None = None,
    ) -> Completion:
        """``budget``: a candidate's toolkit call, cached only in that candidate's part of the cache; ``tools``:
        functions the model may call instead of answering (``Completion.tool_calls``)."""
        body = self.endpoint.payload(messages, json_mode=json_mode, max_tokens=max_tokens, tools=tools,
                                     tool_choice=tool_choice)
        key = request_key("chat", body)
        cache = budget.view(self.cache) if budget is not None and self.cache is not None else self.cache
        caller = budget.namespace if budget is not None else None
        if cache is None:
            completion, call = self._send_with_retries(body, step, caller)
            self._log(call)
            return completion
        hit = self._cached_or_reserved(cache, key)
        if hit is not None:
            self._count(step, cache_hit=True)
            self._log(CallLog(role=self.role, model=self.model, step=step, cache_hit=True))
            return Completion(**json.loads(hit), cached=True)
        try:
            completion, call = self._send_with_retries(body, step, caller)
        except BaseException:
            cache.abandon(key)  # a caller waiting for this reply sends the request itself
            raise
        self._log(call)
        stored = completion.model_dump(include={"text", "tool_calls", "prompt_tokens", "completion_tokens"})
        cache.put_many({key: json.dumps(stored).encode()})
        return completion

    def _cached_or_reserved(self, cache: CacheStore, key: str) -> bytes | None:
        """The cached reply; or None once this caller holds the key's reservation and is to send the request.
        While another caller sends the same request, wait for its reply rather than pay for it twice; its
        reservation lapses after one attempt's timeout, so a waiter on a dead or stuck caller goes on."""
        pause = FIRST_LOOK_S
        while True:
            found = cache.reserve(key, self.endpoint.config.request_timeout_s)
            if found.value is not None:
                return found.value
            if found.mine:
                return None
            with queued():  # another caller's request, the same as this one, is under way
                self._sleep(pause)
            pause = min(2 * pause, LOOK_EVERY_S)

    def _send_with_retries(self, body: dict[str, Any], step: str, caller: str | None) -> tuple[Completion, CallLog]:
        endpoint_key = self.endpoint.config.endpoint_key
        attempt = 0
        while True:
            admission = admitted(self.gateway, endpoint_key, self.endpoint.where(), self._sleep, caller)
            lease = admission.lease
            assert lease is not None  # admitted returns only with one
            try:
                if admission.clear_first and self.endpoint.config.clears_slot:
                    self.endpoint.clear_slot()  # under this request's lease: nothing comes between
                completion = self.endpoint.send(body, caller=caller)
            except CallFailure as failure:
                self.gateway.release(lease)
                self._after_failure(failure, attempt, endpoint_key)
                attempt += 1
                self._count(step, retry=True)
                continue
            call = self.gateway.settle(lease, CallLog(
                role=self.role, model=self.model, step=step, prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens, latency_s=completion.seconds, retries=attempt,
                served_by=completion.served_by,
            ))
            self._count(step, tokens=(completion.prompt_tokens, completion.completion_tokens))
            return completion.model_copy(update={"retries": attempt}), call

    def _after_failure(self, failure: CallFailure, attempt: int, endpoint_key: str) -> None:
        """Raise when retrying cannot help or the retries are used up; otherwise wait before the next try."""
        where = self.endpoint.where()
        if not failure.retryable:
            raise RequestRefused(f"{where} refused the request: {failure}", status=failure.status)
        if attempt >= self.retry.max_retries:
            raise EndpointError(f"{where} failed after {attempt + 1} attempt(s): {failure}")
        if failure.retry_after is not None and failure.retry_after > self.retry.max_retry_after_s:
            raise EndpointError(f"{where} asked to wait {failure.retry_after:.0f} s (Retry-After), longer than "
                                f"{self.retry.max_retry_after_s:g} s: {failure}")
        if failure.retry_after is not None:
            # Everyone using this endpoint backs off, not only the caller that was told to.
            self.gateway.pause(endpoint_key, failure.retry_after)
        delay = self.retry.delay(attempt + 1, failure.retry_after, self._rng)
        log.warning("%s: %s; retry %d/%d in %.1f s", where, failure, attempt + 1, self.retry.max_retries, delay)
        with queued():  # the endpoint's load, shared by every caller
            self._sleep(delay)

    def _log(self, call: CallLog) -> None:
        with self._lock:
            self._calls.append(call)

    def _count(self, step: str, *, cache_hit: bool = False, retry: bool = False, tokens: tuple[int, int] = (0, 0)) -> None:
        with self._lock:
            usage = self._usage.setdefault(step, StepUsage())
            if retry:
                usage.retries += 1
                return
            usage.requests += 1
            usage.cache_hits += int(cache_hit)
            usage.prompt_tokens += tokens[0]
            usage.completion_tokens += tokens[1]
