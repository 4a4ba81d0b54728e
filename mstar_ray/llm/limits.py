"""Per-endpoint admission: requests in flight, requests per minute, and pauses ordered by a 429.

Pure bookkeeping with the clock passed in, so one implementation serves a single process (behind a lock)
and the whole cluster (in the run's gateway actor). Admission is by lease: a caller that is refused is
told how long to wait and asks again, so no caller blocks a thread of the actor. A lease expires after
``lease_ttl_s`` so that a worker that died while holding one cannot starve the run.
"""

from __future__ import annotations

import collections
import itertools

from pydantic import BaseModel, ConfigDict, Field

WINDOW_S = 60.0
# How soon a caller refused for concurrency asks again: short, since a slot frees when any call ends.
CONCURRENCY_POLL_S = 0.05


class EndpointLimit(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_concurrency: int | None = Field(None, gt=0)
    requests_per_minute: int | None = Field(None, gt=0)

    def tighter(self, other: EndpointLimit) -> EndpointLimit:
        """Two roles on one endpoint with different limits: the endpoint gets the stricter of each."""
        def pick(a: int | None, b: int | None) -> int | None:
            return b if a is None else a if b is None else min(a, b)

        return EndpointLimit(
            max_concurrency=pick(self.max_concurrency, other.max_concurrency),
            requests_per_minute=pick(self.requests_per_minute, other.requests_per_minute),
        )


class LimitTable:
    """``max_in_flight``: requests in flight to all endpoints together (the run's own bound), beside each
    endpoint's ``max_concurrency``."""

    def __init__(self, limits: dict[str, EndpointLimit], *, lease_ttl_s: float = 600.0, max_in_flight: int | None = None):
        self.limits = dict(limits)
        self.lease_ttl_s = lease_ttl_s
        self.max_in_flight = max_in_flight
        self._starts: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        self._leases: dict[str, tuple[str, float]] = {}  # lease id -> (endpoint, expiry)
        self._paused_until: dict[str, float] = {}
        self._ids = itertools.count(1)

    def try_acquire(self, endpoint: str, now: float) -> tuple[str | None, float]:
        """A lease id and 0, or no lease and the seconds to wait before asking again."""
        self._expire(now)
        paused = self._paused_until.get(endpoint, 0.0)
        if now < paused:
            return None, paused - now
        limit = self.limits.get(endpoint, EndpointLimit())
        if self.full(endpoint):
            return None, CONCURRENCY_POLL_S
        starts = self._starts[endpoint]
        while starts and starts[0] <= now - WINDOW_S:
            starts.popleft()
        if limit.requests_per_minute is not None and len(starts) >= limit.requests_per_minute:
            return None, starts[0] + WINDOW_S - now
        starts.append(now)
        lease = f"{endpoint}@{next(self._ids)}"
        self._leases[lease] = (endpoint, now + self.lease_ttl_s)
        return lease, 0.0

    def full(self, endpoint: str) -> bool:
        """Whether a request to ``endpoint`` must wait for one in flight to end (its own limit or the run's)."""
        if self.max_in_flight is not None and len(self._leases) >= self.max_in_flight:
            return True
        limit = self.limits.get(endpoint, EndpointLimit()).max_concurrency
        return limit is not None and sum(1 for ep, _ in self._leases.values() if ep == endpoint) >= limit

    def in_flight(self) -> dict[str, int]:
        """Leases held now, by endpoint."""
        return dict(collections.Counter(ep for ep, _ in self._leases.values()))

    def release(self, lease: str) -> None:
        self._leases.pop(lease, None)

    @staticmethod
    def endpoint_of(lease: str) -> str:
        return lease.rpartition("@")[0]

    def pause(self, endpoint: str, until: float) -> None:
        """Hold every caller of this endpoint until ``until`` (a server asked us to back off)."""
        self._paused_until[endpoint] = max(self._paused_until.get(endpoint, 0.0), until)

    def _expire(self, now: float) -> None:
        for lease in [lease for lease, (_, expiry) in self._leases.items() if expiry <= now]:
            del self._leases[lease]
