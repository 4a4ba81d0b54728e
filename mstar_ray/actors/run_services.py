"""The run's shared services on a Ray cluster: one cache and one gateway (limits, ledger, budget) for all
workers, pinned to the driver's node, where the run directory lives.

The cache is a threaded actor holding a thread-safe ``SqliteCache``, the gateway an asyncio actor holding the
``Governor`` (it holds callers waiting for a slot without a thread each); they ask for no CPU so they never take a slot an evaluator could use. Workers talk to them through ``RemoteCache`` and
``RemoteGateway``, which implement the same interfaces as the local objects.

Both are named actors, and the evaluator and reflector actors are given their names, not handles: an
actor handle among an actor's constructor arguments is held in the object store for its restarts, which
Ray warns about on every run (and which a lost object would break); a name is looked up again on restart.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from mstar_ray.llm.cache import Reservation, SqliteCache
from mstar_ray.llm.governor import Admission, Governor, UsageSnapshot
from mstar_ray.llm.ledger import RoleUsage
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.llm.usage import CallLog
from mstar_ray.runlog import layout

# Concurrent calls an actor serves; waits happen in the callers, so calls are short.
SERVICE_THREADS = 32


@ray.remote(num_cpus=0, max_concurrency=SERVICE_THREADS)
class CacheActor:
    def __init__(self, path: str):
        self.store = SqliteCache(path)

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        return self.store.get_many(keys)

    def put_many(self, items: dict[str, bytes]) -> None:
        self.store.put_many(items)

    def reserve(self, key: str, ttl_s: float) -> Reservation:
        return self.store.reserve(key, ttl_s)

    def abandon(self, key: str) -> None:
        self.store.abandon(key)

    def size(self) -> int:
        return len(self.store)


# Callers an admission may hold at once (the gateway is an asyncio actor: a held caller costs a coroutine, not
# a thread): every request the run's evaluators and reflectors can have waiting.
GATEWAY_CALLERS = 4096


@ray.remote(num_cpus=0, max_concurrency=GATEWAY_CALLERS)
class GatewayActor:
    """The ``Governor`` of the run. Its methods run one at a time on the actor's event loop (each is a few
    dictionary operations); ``admit_waiting`` holds a caller whose endpoint is busy until a request in flight
    ends, so the run's slots are handed out as they free, across every node, with no polling."""

    def __init__(self, settings: LLMSettings):
        self.governor = Governor.for_settings(settings)
        self._freed: asyncio.Event | None = None

    def _notify(self) -> None:
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    async def admit(self, endpoint: str) -> Admission:
        return self.governor.admit(endpoint)

    async def admit_waiting(self, endpoint: str, hold_s: float) -> Admission:
        deadline = time.monotonic() + hold_s
        while True:
            admission = self.governor.admit(endpoint)
            left = deadline - time.monotonic()
            if not admission.busy or left <= 0:
                return admission
            if self._freed is None:
                self._freed = asyncio.Event()
            try:
                await asyncio.wait_for(self._freed.wait(), left)
            except asyncio.TimeoutError:
                pass

    async def settle(self, lease: str, call: CallLog) -> CallLog:
        settled = self.governor.settle(lease, call)
        self._notify()
        return settled

    async def release(self, lease: str) -> None:
        self.governor.release(lease)
        self._notify()

    async def pause(self, endpoint: str, seconds: float) -> None:
        self.governor.pause(endpoint, seconds)

    async def snapshot(self) -> UsageSnapshot:
        return self.governor.snapshot()

    async def restore(self, usage: dict[str, RoleUsage]) -> None:
        self.governor.restore(usage)


class RemoteCache:
    """``CacheStore`` over the run's ``CacheActor``; picklable, so it travels to any worker."""

    def __init__(self, actor: ray.actor.ActorHandle, name: str = ""):
        self.actor = actor
        self.name = name

    @classmethod
    def named(cls, name: str) -> RemoteCache:
        return cls(ray.get_actor(name), name)

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        return ray.get(self.actor.get_many.remote(keys))

    def put_many(self, items: dict[str, bytes]) -> None:
        # Waited for, so a worker reads its own writes and a finished evaluation is really cached.
        ray.get(self.actor.put_many.remote(items))

    def reserve(self, key: str, ttl_s: float) -> Reservation:
        return ray.get(self.actor.reserve.remote(key, ttl_s))

    def abandon(self, key: str) -> None:
        ray.get(self.actor.abandon.remote(key))


class RemoteGateway:
    """``Gateway`` over the run's ``GatewayActor``."""

    def __init__(self, actor: ray.actor.ActorHandle, name: str = ""):
        self.actor = actor
        self.name = name

    @classmethod
    def named(cls, name: str) -> RemoteGateway:
        return cls(ray.get_actor(name), name)

    def admit(self, endpoint: str) -> Admission:
        return ray.get(self.actor.admit.remote(endpoint))

    def admit_waiting(self, endpoint: str, hold_s: float) -> Admission:
        return ray.get(self.actor.admit_waiting.remote(endpoint, hold_s))

    def settle(self, lease: str, call: CallLog) -> CallLog:
        return ray.get(self.actor.settle.remote(lease, call))

    def release(self, lease: str) -> None:
        ray.get(self.actor.release.remote(lease))

    def pause(self, endpoint: str, seconds: float) -> None:
        ray.get(self.actor.pause.remote(endpoint, seconds))

    def snapshot(self) -> UsageSnapshot:
        return ray.get(self.actor.snapshot.remote())

    def restore(self, usage: dict[str, RoleUsage]) -> None:
        ray.get(self.actor.restore.remote(usage))


def on_this_node() -> NodeAffinitySchedulingStrategy:
    """Pins an actor to the caller's (the driver's) node, where the run directory lives."""
    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


def start_run_services(run_dir: str | Path, settings: LLMSettings) -> tuple[RemoteCache, RemoteGateway]:
    """Start both services on this (the driver's) node; the cache's file in ``run_dir``."""
    here = on_this_node()
    path = str(Path(run_dir).resolve() / layout.CACHE)
    token = uuid.uuid4().hex[:12]
    cache_name, gateway_name = f"mstar-cache-{token}", f"mstar-gateway-{token}"
    cache = CacheActor.options(name=cache_name, scheduling_strategy=here).remote(path)
    gateway = GatewayActor.options(name=gateway_name, scheduling_strategy=here).remote(settings)
    ray.get([cache.size.remote(), gateway.snapshot.remote()])  # surface a failed start here, not later
    return RemoteCache(cache, cache_name), RemoteGateway(gateway, gateway_name)
