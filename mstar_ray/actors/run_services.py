"""The run's shared services on a Ray cluster: one cache and one gateway (limits, ledger, budget) for all
workers, pinned to the driver's node, where the run directory lives.

Each service is its own object made an actor, its methods written once: the cache is the thread-safe
``SqliteCache`` as a threaded actor, the gateway the ``Governor`` as an asyncio actor (``WaitingGovernor``: it
holds callers waiting for a slot without a thread each). They ask for no CPU, so they never take a slot an
evaluator could use. Workers reach either through ``Remote``, one proxy that sends any method call to the named
actor and waits for its answer, so it answers the same calls as the object (``CacheStore``, ``Gateway``).

Both are named actors, and the evaluator and reflector actors are given their names, not handles: an
actor handle among an actor's constructor arguments is held in the object store for its restarts, which
Ray warns about on every run (and which a lost object would break); a name is looked up again on restart.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from mstar_ray.llm.cache import SqliteCache
from mstar_ray.llm.governor import Admission, Governor, governed_by
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.llm.usage import CallLog
from mstar_ray.runlog import layout

# Concurrent calls the cache serves; waits happen in the callers, so calls are short.
SERVICE_THREADS = 32
# Callers the gateway may hold at once (an asyncio actor: a held caller costs a coroutine, not a thread): every
# request the run's evaluators and reflectors can have waiting.
GATEWAY_CALLERS = 4096

CacheActor = ray.remote(num_cpus=0, max_concurrency=SERVICE_THREADS)(SqliteCache)  # type: ignore[call-overload]  # Ray's typed overloads omit actor options (max_concurrency)


class WaitingGovernor(Governor):
    """The run's ``Governor`` as the gateway actor runs it: its methods one at a time on the actor's event loop
    (each is a few dictionary operations), and ``admit_waiting`` holding a caller whose endpoint is busy until a
    request in flight ends, so the run's slots are handed out as they free, across every node, with no polling."""

    def __init__(self, settings: LLMSettings):
        super().__init__(**governed_by(settings))
        self._released: asyncio.Event | None = None  # set when a request in flight ends

    def _notify(self) -> None:
        if self._released is not None:
            self._released.set()
            self._released = None

    async def admit_waiting(self, endpoint: str, hold_s: float, caller: str | None = None) -> Admission:  # type: ignore[override]
        deadline = time.monotonic() + hold_s
        while True:
            admission = self.admit(endpoint, caller)
            left = deadline - time.monotonic()
            if not admission.busy or left <= 0:
                return admission
            if self._released is None:
                self._released = asyncio.Event()
            try:
                await asyncio.wait_for(self._released.wait(), left)
            except asyncio.TimeoutError:
                pass

    def settle(self, lease: str, call: CallLog) -> CallLog:
        settled = super().settle(lease, call)
        self._notify()
        return settled

    def release(self, lease: str) -> None:
        super().release(lease)
        self._notify()


GatewayActor = ray.remote(num_cpus=0, max_concurrency=GATEWAY_CALLERS)(WaitingGovernor)  # type: ignore[call-overload]  # Ray's typed overloads omit actor options (max_concurrency)


class Remote:
    """A run service as a worker holds it: every method call goes to the named actor and waits for its answer
    (a write too, so a worker reads its own writes and a finished evaluation is really cached). Picklable, so
    it travels to any worker."""

    def __init__(self, actor: ray.actor.ActorHandle[Any], name: str = ""):
        self.actor = actor
        self.name = name

    @classmethod
    def named(cls, name: str) -> Remote:
        return cls(ray.get_actor(name), name)

    def call(self, method: str, *args: Any) -> Any:
        return ray.get(getattr(self.actor, method).remote(*args))

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):  # pickling and copying look up dunders before __init__ has run
            raise AttributeError(method)
        return functools.partial(self.call, method)


def on_this_node() -> NodeAffinitySchedulingStrategy:
    """Pins an actor to the caller's (the driver's) node, where the run directory lives."""
    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


def start_run_services(run_dir: str | Path, settings: LLMSettings) -> tuple[Remote, Remote]:
    """Start both services on this (the driver's) node, the cache's file in ``run_dir``: (cache, gateway)."""
    here = on_this_node()
    path = str(Path(run_dir).resolve() / layout.CACHE)
    token = uuid.uuid4().hex[:12]
    cache_name, gateway_name = f"mstar-cache-{token}", f"mstar-gateway-{token}"
    cache = CacheActor.options(name=cache_name, scheduling_strategy=here).remote(path)
    gateway = GatewayActor.options(name=gateway_name, scheduling_strategy=here).remote(settings)
    ray.get([cache.__ray_ready__.remote(), gateway.__ray_ready__.remote()])  # surface a failed start here, not later
    return Remote(cache, cache_name), Remote(gateway, gateway_name)
