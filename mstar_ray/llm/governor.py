"""The run-wide admission and accounting point: limits per endpoint plus the cost ledger and budget.

In a single process a ``Governor`` is used directly; on a cluster one is the run's gateway actor
(``actors.run_services``) and workers reach it through a ``Remote`` proxy, both with the same calls (``admit``,
then ``settle`` or ``release``, and ``pause``), so every limit and the budget hold across all actors of the run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from mstar_ray.llm.endpoint import clears_before
from mstar_ray.llm.errors import BudgetExceeded
from mstar_ray.llm.ledger import Budget, Ledger, Price, RoleUsage
from mstar_ray.llm.limits import EndpointLimit, LimitTable
from mstar_ray.llm.usage import CallLog
from mstar_ray.llm.waiting import queued

if TYPE_CHECKING:
    from mstar_ray.llm.settings import LLMSettings


class Admission(BaseModel):
    lease: str | None = None
    wait_s: float = 0.0
    stop: str | None = None  # the budget is spent: do not retry, stop
    busy: bool = False  # refused because the endpoint (or the run) has as many requests in flight as it may
    # The endpoint's last request was not this caller's (or nobody knows whose it was): a server that reuses the
    # last prompt's state must be cleared first, or the caller could time the other's prompt (``clears_slot``).
    clear_first: bool = False


# How long one admission may hold a caller whose endpoint is busy before answering "ask again": a slot is
# handed out as soon as one frees (no polling), and no caller waits on one request for ever.
HOLD_S = 5.0


class UsageSnapshot(BaseModel):
    by_role: dict[str, RoleUsage]
    total: RoleUsage
    stop: str | None
    in_flight: dict[str, int] = {}  # requests in flight now, by endpoint


class Gateway(Protocol):
    def admit(self, endpoint: str, caller: str | None = None) -> Admission:
        """A lease for one request to ``endpoint`` on behalf of the candidate ``caller`` (None: the host)."""

    def admit_waiting(self, endpoint: str, hold_s: float, caller: str | None = None) -> Admission:
        """``admit``, but while the endpoint is busy wait (up to ``hold_s``) for a request in flight to end."""

    def settle(self, lease: str, call: CallLog) -> CallLog: ...

    def release(self, lease: str) -> None: ...

    def pause(self, endpoint: str, seconds: float) -> None: ...

    def snapshot(self) -> UsageSnapshot: ...

    def restore(self, usage: dict[str, RoleUsage]) -> None: ...


def admitted(gateway: Gateway, endpoint: str, where: str, sleep: Callable[[float], None] = time.sleep,
             caller: str | None = None) -> Admission:
    """A lease for one request to ``endpoint`` for ``caller`` (waiting while its limits say so), or
    ``BudgetExceeded`` naming ``where`` once the run's budget is spent: how every paid call, chat or embedding,
    starts."""
    with queued():  # behind the run's other requests: not the caller's own time (mstar_ray.llm.waiting)
        while True:
            admission = gateway.admit_waiting(endpoint, HOLD_S, caller)
            if admission.stop:
                raise BudgetExceeded(f"{where}: {admission.stop}")
            if admission.lease is not None:
                return admission
            if not admission.busy:  # a rate limit or a pause: their wait is known
                sleep(admission.wait_s)


def governed_by(settings: LLMSettings) -> dict[str, Any]:
    """A governor's arguments from the run's llm settings (``Governor.for_settings``, the gateway actor's)."""
    return {"limits": settings.limits(), "prices": settings.prices, "budget": settings.budget,
            "max_in_flight": settings.max_in_flight}


class Governor:
    def __init__(
        self,
        limits: dict[str, EndpointLimit] | None = None,
        prices: dict[str, Price] | None = None,
        budget: Budget | None = None,
        *,
        lease_ttl_s: float = 600.0,
        max_in_flight: int | None = None,
    ):
        self._table = LimitTable(limits or {}, lease_ttl_s=lease_ttl_s, max_in_flight=max_in_flight)
        self._ledger = Ledger(prices, budget)
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)  # a request in flight ended
        # Whose request each endpoint was last given to (None: the host's); absent: nobody known (none yet, or one
        # that failed and may have left anything in the server's state), which clears like the host's.
        self._holders: dict[str, str | None] = {}

    @classmethod
    def for_settings(cls, settings: LLMSettings) -> Governor:
        """The run's governor: every endpoint's limits, the run's in-flight bound, prices and budget."""
        return cls(**governed_by(settings))

    def admit(self, endpoint: str, caller: str | None = None) -> Admission:
        with self._lock:
            return self._admit(endpoint, caller)

    def _admit(self, endpoint: str, caller: str | None) -> Admission:
        stop = self._ledger.stop_reason()
        if stop:
            return Admission(stop=stop)
        lease, wait = self._table.try_acquire(endpoint, time.monotonic())
        if lease is None:
            return Admission(wait_s=wait, busy=self._table.full(endpoint))
        clear = clears_before(caller, self._holders.get(endpoint))
        self._holders[endpoint] = caller
        return Admission(lease=lease, clear_first=clear)

    def admit_waiting(self, endpoint: str, hold_s: float, caller: str | None = None) -> Admission:
        deadline = time.monotonic() + hold_s
        with self._lock:
            while True:
                admission = self._admit(endpoint, caller)
                left = deadline - time.monotonic()
                if not admission.busy or left <= 0:
                    return admission
                self._freed.wait(left)

    def settle(self, lease: str, call: CallLog) -> CallLog:
        """Ends an answered attempt: frees its lease and books the call; returns it priced."""
        with self._lock:
            self._table.release(lease)
            self._freed.notify_all()
            return self._ledger.record(call)

    def release(self, lease: str) -> None:
        """Ends an attempt that got no answer: nothing to book (whether a server bills one, it does not say)."""
        with self._lock:
            self._holders.pop(self._table.endpoint_of(lease), None)
            self._table.release(lease)
            self._freed.notify_all()

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
                in_flight=self._table.in_flight(),
            )
