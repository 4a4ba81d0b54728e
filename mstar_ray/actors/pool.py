"""A pool of Ray actors, one kind per piece of work (evaluators, reflectors): submit work to an idle actor,
wait for the next finished, replace an actor that died. A plain class with Ray at its edge, shaped like
``ray.util.ActorPool``; what to run next and what a result means is the search policy's business."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic

import ray
from ray.exceptions import RayActorError, RayTaskError

from mstar_ray.search.work import Crashed, Done, Finished, Payload, Raised, Value, Work, WorkKind

# Each actor of the pool may be replaced this many times over the run (on average) before the pool gives up:
# actors that keep dying point at a broken install or node image, which replacing cannot cure.
MAX_REPLACEMENTS_PER_ACTOR = 3


class WorkersKeepDying(RuntimeError):
    pass


class WorkerPool(Generic[Payload, Value]):
    """``Pool[Payload, Value]`` on Ray: each actor's method named after the work's kind takes a ``Payload`` and
    returns a ``Value``."""

    def __init__(self, factories: dict[WorkKind, Callable[[], Any]], sizes: dict[WorkKind, int]):
        self._factories = factories
        self.actors: dict[WorkKind, list[Any]] = {kind: [factories[kind]() for _ in range(n)] for kind, n in sizes.items()}
        self._idle: dict[WorkKind, list[Any]] = {kind: list(actors) for kind, actors in self.actors.items()}
        self._running: dict[ray.ObjectRef[Value], tuple[Work[Payload], Any]] = {}
        self.replacements = 0

    def idle(self, kind: WorkKind) -> int:
        return len(self._idle[kind])

    def busy(self) -> bool:
        return bool(self._running)

    def running(self) -> list[Work[Payload]]:
        return [work for work, _ in self._running.values()]

    def all_actors(self) -> list[Any]:
        return [actor for actors in self.actors.values() for actor in actors]

    def submit(self, work: Work[Payload]) -> None:
        actor = self._idle[work.kind].pop()
        self._running[getattr(actor, work.kind).remote(work.payload)] = (work, actor)

    def next_finished(self, timeout_s: float) -> list[Done[Payload, Value]]:
        """What finished within ``timeout_s`` (possibly nothing); their actors are idle again."""
        ready, _ = ray.wait(list(self._running), num_returns=1, timeout=timeout_s)
        return [self._collect(ref) for ref in ready]

    def _collect(self, ref: ray.ObjectRef[Value]) -> Done[Payload, Value]:
        work, actor = self._running.pop(ref)
        try:
            value = ray.get(ref)
        except RayActorError as exc:
            self._replace(work.kind, actor)
            return Crashed(work, f"{type(exc).__name__}: {exc}")
        except RayTaskError as exc:
            self._idle[work.kind].append(actor)
            return Raised(work, exc.as_instanceof_cause() if hasattr(exc, "as_instanceof_cause") else exc)
        self._idle[work.kind].append(actor)
        return Finished(work, value)

    def _replace(self, kind: WorkKind, dead: Any) -> None:
        self.replacements += 1
        if self.replacements > MAX_REPLACEMENTS_PER_ACTOR * len(self.all_actors()):
            raise WorkersKeepDying(f"{kind} actors keep dying ({self.replacements} replaced)")
        replacement = self._factories[kind]()
        actors = self.actors[kind]
        actors[actors.index(dead)] = replacement
        self._idle[kind].append(replacement)

    def shutdown(self) -> None:
        for actor in self.all_actors():
            ray.kill(actor)
