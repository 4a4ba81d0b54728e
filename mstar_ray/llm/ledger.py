"""Tokens and cost per role, priced from the config's table, against the run's budget.

Cache hits cost nothing and are not recorded here; the callers count them for the hit rate.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mstar_ray.llm.usage import CallLog


class Price(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_mtok: float = Field(0.0, ge=0, description="USD per million prompt tokens")
    output_per_mtok: float = Field(0.0, ge=0, description="USD per million completion tokens")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6


class Budget(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_usd: float | None = Field(None, gt=0, description="stop the run once its model calls cost this much (USD)")
    max_tokens: int | None = Field(None, gt=0, description="prompt + completion tokens over all roles")


class RoleUsage(BaseModel):
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: RoleUsage) -> None:
        for name in RoleUsage.model_fields:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class Ledger:
    def __init__(self, prices: dict[str, Price] | None = None, budget: Budget | None = None):
        self.prices = dict(prices or {})
        self.budget = budget or Budget()
        self.by_role: dict[str, RoleUsage] = {}

    def record(self, call: CallLog) -> CallLog:
        """Books an answered request against its role and returns it priced: the one place a cost is computed,
        so the budget and the run log agree. A model the table does not list costs nothing (a local server)."""
        price = self.prices.get(call.model)
        cost = price.cost(call.prompt_tokens, call.completion_tokens) if price is not None else 0.0
        usage = self.by_role.setdefault(call.role, RoleUsage())
        usage.calls += 1
        usage.prompt_tokens += call.prompt_tokens
        usage.completion_tokens += call.completion_tokens
        usage.cost_usd += cost
        return call.model_copy(update={"cost_usd": cost})

    def total(self) -> RoleUsage:
        total = RoleUsage()
        for usage in self.by_role.values():
            total.add(usage)
        return total

    def stop_reason(self) -> str | None:
        """Why no further paid call may start, or ``None``. Calls already in flight finish, so a run can
        end slightly above its budget by at most those calls."""
        total = self.total()
        if self.budget.max_usd is not None and total.cost_usd >= self.budget.max_usd:
            return f"budget spent: ${total.cost_usd:.4f} of ${self.budget.max_usd:g}"
        if self.budget.max_tokens is not None and total.tokens >= self.budget.max_tokens:
            return f"budget spent: {total.tokens} of {self.budget.max_tokens} tokens"
        return None
