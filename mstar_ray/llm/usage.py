"""What the LLM requests took: per step (extract, query, answer, toolkit, judge, reflect...) how many were
asked, how many the cache answered, how many retries and tokens they took; and the record of each request.
Free of the ``openai`` import so the offline path does not pay for it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, NonNegativeInt


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
    """One request to a model, the one record of it: the client makes it, the ledger prices it, the actor
    returns it with its job's result, and the run log stores it (``runlog.schemas.LLMCallRow`` is this record
    with when it was logged and for which program). A cache hit is a request that cost nothing."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: str
    model: str
    step: str
    prompt_tokens: NonNegativeInt = 0
    completion_tokens: NonNegativeInt = 0
    latency_s: float = 0.0
    cache_hit: bool = False
    cost_usd: float = 0.0  # set by ``llm.ledger.Ledger.record``, the one place a cost is computed
    retries: NonNegativeInt = 0
    served_by: str | None = None  # the replica of a model the run serves that answered (mstar_ray.serve)
