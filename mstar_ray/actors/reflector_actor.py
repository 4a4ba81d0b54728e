"""The reflector actor: turns a reflection request into a checked child (or a discard), with the smoke
test run in a sandbox here and the reflector model reached through the run's cache and gateway."""

from __future__ import annotations

import ray
from typing import Any

from mstar_ray.actors.run_services import Remote
from mstar_ray.actors.wiring import RoleClients
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.reflect.reflector import ReflectionOutcome, answer
from mstar_ray.reflect.registry import ReflectorSetup, make_reflector
from mstar_ray.reflect.request import ReflectionRequest
from mstar_ray.reflect.smoke import smoke_test
from mstar_ray.sandbox_host.fork_server import warm_fork_servers
from mstar_ray.sandbox_host.process import check_layers
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits


@ray.remote
class ReflectorActor:
    def __init__(self, kind: str, settings: LLMSettings, limits: SandboxLimits, max_repairs: int,
                 cache_name: str, gateway_name: str, run_dir: str | None = None, ensemble: list[str] | None = None):
        warm_fork_servers()  # with the actor, not at its first job
        # the run's services by name (see run_services): no actor handle among the constructor arguments
        self.roles = roles = RoleClients(settings, cache=Remote.named(cache_name),
                                         gateway=Remote.named(gateway_name))
        self.embedder = roles.embedder()
        self.limits = limits
        # ``ensemble``: the offline stand-ins of search.ensemble, one reflector each (none: ``kind`` alone)
        self.reflector = make_reflector(kind, ReflectorSetup(settings, max_repairs, roles.client, run_dir), ensemble or ())

    def sandbox_layers(self) -> dict[str, Any]:
        """The layers its smoke tests' sandboxes get here; raises ``SandboxUnavailable`` when a required one is missing."""
        return check_layers(self.limits)

    def reflect(self, request: ReflectionRequest) -> ReflectionOutcome:
        self.roles.drain_calls()  # a retried request starts its own record
        result, guidance = answer(self.reflector, request, lambda source: smoke_test(source, self.embedder, self.limits))
        return ReflectionOutcome(result=result, calls=self.roles.drain_calls(), guidance=guidance)
