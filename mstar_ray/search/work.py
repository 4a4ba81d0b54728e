"""Work handed to a worker pool and what comes back, Ray-free, so the search policy can be driven by the Ray
pool (``mstar_ray.actors.pool``) or by a plain in-process one in tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

WorkKind = Literal["evaluate", "reflect"]

# What a worker is called with, and what it returns: the search's (an EvalJob or a ReflectionRequest, and an
# EvalOutcome or a ReflectionOutcome) are named where both are known (mstar_ray.search_loop.policy); this layer
# only carries them, so it is generic in them.
Payload = TypeVar("Payload")
Value = TypeVar("Value")
# Work only carries its payload (nothing rebinds it), so a Work[EvalJob] is a Work[EvalJob | ReflectionRequest].
Carried = TypeVar("Carried", covariant=True)


@dataclass(eq=False)  # by identity: two submissions of equal payloads are two pieces of work
class Work(Generic[Carried]):
    kind: WorkKind
    payload: Carried  # what the worker's method named ``kind`` is called with
    tag: object = None  # the policy's own record of what this work is for (a Candidate for a search evaluation)


@dataclass(frozen=True)
class Finished(Generic[Payload, Value]):
    work: Work[Payload]
    value: Value  # what the worker returned


@dataclass(frozen=True)
class Crashed(Generic[Payload]):
    """The worker died under the work (after Ray's own restarts); the pool replaced it. Re-issue or give up."""

    work: Work[Payload]
    error: str


@dataclass(frozen=True)
class Raised(Generic[Payload]):
    """The worker raised: ``error`` is the exception it raised (not a Ray wrapper)."""

    work: Work[Payload]
    error: BaseException


Done = Finished[Payload, Value] | Crashed[Payload] | Raised[Payload]


class Pool(Protocol[Payload, Value]):
    """Workers the policy's work is handed to (``mstar_ray.actors.pool.WorkerPool`` on Ray)."""

    def idle(self, kind: WorkKind) -> int: ...

    def busy(self) -> bool: ...

    def submit(self, work: Work[Payload]) -> None: ...

    def next_finished(self, timeout_s: float) -> list[Done[Payload, Value]]: ...
