"""The run-wide admission and accounting point: limits per endpoint plus the cost ledger and budget.

In a single process a ``Governor`` is used directly; on a cluster one lives inside the ``GatewayActor``
and workers reach it through ``RemoteGateway``, both with the same calls (``admit``, then ``settle`` or
``release``, and ``pause``), so every limit and the budget hold across all actors of the run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel

from mstar_ray.llm.errors import BudgetExceeded
from mstar_ray.llm.ledger import Budget, Ledger, Price, RoleUsage
from mstar_ray.llm.limits import EndpointLimit, LimitTable
from mstar_ray.llm.usage import CallLog


class Admission(BaseModel):
    lease: str | None = None
    wait_s: float = 0.0
    stop: str | None = None  # the budget is spent: do not retry, stop


class UsageSnapshot(BaseModel):
    by_role: dict[str, RoleUsage]
    total: RoleUsage
    stop: str | None


class Gateway(Protocol):
    def admit(self, endpoint: str) -> Admission: ...

    def settle(self, lease: str, call: CallLog) -> CallLog: ...

    def release(self, lease: str) -> None: ...

    def pause(self, endpoint: str, seconds: float) -> None: ...

    def snapshot(self) -> UsageSnapshot: ...

    def restore(self, usage: dict[str, RoleUsage]) -> None: ...


def admitted(gateway: Gateway, endpoint: str, where: str, sleep: Callable[[float], None] = time.sleep) -> str:
    """A lease for one request to ``endpoint`` (waiting while its limits say so), or ``BudgetExceeded``
    naming ``where`` once the run's budget is spent: how every paid call, chat or embedding, starts."""
    while True:
        admission = gateway.admit(endpoint)
        if admission.stop:
            raise BudgetExceeded(f"{where}: {admission.stop}")
        if admission.lease is not None:
            return admission.lease
        sleep(admission.wait_s)


class Governor:
    def __init__(
        self,
        limits: dict[str, EndpointLimit] | None = None,
        prices: dict[str, Price] | None = None,
        budget: Budget | None = None,
        *,
        lease_ttl_s: float = 600.0,
    ):
        self._table = LimitTable(limits or {}, lease_ttl_s=lease_ttl_s)
        self._ledger = Ledger(prices, budget)
        self._lock = threading.Lock()

    def admit(self, endpoint: str) -> Admission:
        with self._lock:
            stop = self._ledger.stop_reason()
            if stop:
                return Admission(stop=stop)
            lease, wait = self._table.try_acquire(endpoint, time.monotonic())
            return Admission(lease=lease, wait_s=wait)

    def settle(self, lease: str, call: CallLog) -> CallLog:
        """Ends an answered attempt: frees its lease and books the call; returns it priced."""
        with self._lock:
            self._table.release(lease)
            return self._ledger.record(call)

    def release(self, lease: str) -> None:
        """Ends an attempt that got no answer: nothing to book (whether a server bills one, it does not say)."""
        with self._lock:
            self._table.release(lease)

    def pause(self, endpoint: str, seconds: float) -> None:
        with self._lock:
            self._table.pause(endpoint, time.monotonic() + seconds)

    def restore(self, usage: dict[str, RoleUsage]) -> None:
        """Spending recorded before a resume, so the budget counts the whole run."""
        with self._lock:
            for role, spent in usage.items():
                self._ledger.by_role.setdefault(role, RoleUsage()).add(spent)

    def snapshot(self) -> UsageSnapshot:
        with self._lock:
            return UsageSnapshot(
                by_role={k: v.model_copy() for k, v in self._ledger.by_role.items()},
                total=self._ledger.total(),
                stop=self._ledger.stop_reason(),
            )
