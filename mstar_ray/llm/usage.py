"""Requests per step (extract, query, answer, toolkit, judge, reflect...): how many were asked, how many
the cache answered, how many retries and tokens they took. Free of the ``openai`` import so the offline
path does not pay for it."""

from __future__ import annotations

from pydantic import BaseModel


class StepUsage(BaseModel):
    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def new_calls(self) -> int:
        return self.requests - self.cache_hits

    def minus(self, earlier: StepUsage) -> StepUsage:
        return StepUsage(**{k: getattr(self, k) - getattr(earlier, k) for k in StepUsage.model_fields})


def usage_since(now: dict[str, StepUsage], before: dict[str, StepUsage]) -> dict[str, StepUsage]:
    return {step: usage.minus(before.get(step, StepUsage())) for step, usage in now.items()}


class CallLog(BaseModel):
    """One request as the run log records it (``llm_calls``): a cache hit is a call that cost nothing."""

    role: str
    model: str
    step: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_hit: bool = False
    retries: int = 0
