"""When and how long to wait before retrying a failed request.

Our own loop rather than the ``openai`` client's ``max_retries`` so that every retry passes the run-wide
rate limiter again, a 429's Retry-After pauses the endpoint for all workers (not just the one that saw it),
and each retry is counted and reported to the user.
"""

from __future__ import annotations

import email.utils
import random
import time

from pydantic import BaseModel, ConfigDict, Field


class RetryPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_retries: int = Field(4, ge=0)
    base_s: float = Field(0.5, gt=0, description="first backoff; doubles each attempt")
    cap_s: float = Field(30.0, gt=0, description="no single wait is longer than this (unless Retry-After says so)")
    max_retry_after_s: float = Field(120.0, gt=0, description="a longer Retry-After is treated as a failure")

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based). Full jitter spreads the retries of many
        workers that failed together; a server's Retry-After is a floor, never shortened."""
        backoff = rng.uniform(0, min(self.cap_s, self.base_s * 2 ** (attempt - 1)))
        return max(backoff, retry_after or 0.0)


def parse_retry_after(headers: object) -> float | None:
    """Seconds from ``retry-after-ms``, or ``retry-after`` as seconds or an HTTP date; ``None`` if absent."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    millis = get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(0.0, email.utils.mktime_tz(parsed) - time.time())
