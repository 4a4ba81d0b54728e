"""Work handed to a worker pool and what comes back, Ray-free, so the search policy can be driven by the Ray
pool (``mstar_ray.actors.pool``) or by a plain in-process one in tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

WorkKind = Literal["evaluate", "reflect"]


@dataclass(eq=False)  # by identity: two submissions of equal payloads are two pieces of work
class Work:
    kind: WorkKind
    payload: Any  # an EvalJob (evaluate) or a ReflectionRequest (reflect): what the worker is called with
    tag: Any = None  # the policy's own record of what this work is for (a Candidate for a search evaluation)


@dataclass(frozen=True)
class Finished:
    work: Work
    value: Any  # what the worker returned


@dataclass(frozen=True)
class Crashed:
    """The worker died under the work (after Ray's own restarts); the pool replaced it. Re-issue or give up."""

    work: Work
    error: str


@dataclass(frozen=True)
class Raised:
    """The worker raised: ``error`` is the exception it raised (not a Ray wrapper)."""

    work: Work
    error: BaseException


Done = Finished | Crashed | Raised


class Pool(Protocol):
    """Workers the policy's work is handed to (``mstar_ray.actors.pool.WorkerPool`` on Ray)."""

    def idle(self, kind: WorkKind) -> int: ...

    def busy(self) -> bool: ...

    def submit(self, work: Work) -> None: ...

    def next_finished(self, timeout_s: float) -> list[Done]: ...
