"""The run's served models (``mstar_ray.serve``) from the driver's side: deployed before any endpoint is probed,
their replicas' placement, start-up and health written to the events log as they change, shut down (or
kept) at the end."""

from __future__ import annotations

from collections.abc import Callable

from mstar_ray.driver.run_dir import RunDir
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.run_config import RunConfig
from mstar_ray.serve.deploy import Serving
from mstar_ray.serve.replicas import ReplicaChange


class RunServing:
    def __init__(self, config: RunConfig, say: Callable[[str], None]):
        self.config = config
        self.serving = Serving(config.serve, say)
        self.say = say
        self.run_dir: RunDir | None = None
        self._unlogged: list[ReplicaChange] = []

    def start(self, *, local_ray: bool) -> LLMSettings:
        """Deploy and wait; the ``llm`` settings with every served role calling its model's application."""
        ray_config = self.config.ray
        evaluator = {"CPU": ray_config.evaluator_cpus, **ray_config.evaluator_resources}
        if self.config.serve.keep and local_ray:
            self.say("serve.keep: a local Ray ends with the run, and its deployments with it; run on a cluster "
                     "(--address) to keep them for the next run")
        self._unlogged = self.serving.start(local_ray=local_ray, beside=evaluator)
        for change in self._unlogged:
            self.say(f"serve: {change.detail}")
        for name, url in self.serving.urls.items():
            self.say(f"serve: {name} at {url}")
        return self.config.llm.at_served(self.serving.urls, self.config.serve.parallel())

    def held(self) -> dict[str, float]:
        """What the healthy replicas hold of the cluster (the evaluators get what is left)."""
        held: dict[str, float] = {}
        for record in self.serving.replicas.values():
            model = self.config.serve.model(record.app)
            if record.state == "RUNNING" and model is not None and record.deployment == model.deployment_name:
                for name, amount in model.resources.ask().items():
                    held[name] = held.get(name, 0.0) + amount
        return held

    def log_to(self, run_dir: RunDir) -> None:
        """From now on replica changes go to ``run_dir``'s events. The start's are written at the first
        ``watch``: once the search has begun, so a resumed run's wall time does not count the deployment
        twice (``state.replay.wall_seconds`` counts each process from its first event)."""
        self.run_dir = run_dir

    def watch(self) -> None:
        """One look (at most every few seconds): changes to the events log."""
        self._write([*self._unlogged, *self.serving.look()])
        self._unlogged = []

    def stop(self) -> None:
        self._write([*self._unlogged, *self.serving.look(force=True)])
        self._unlogged = []
        self._write(self.serving.stop())

    def _write(self, found: list[ReplicaChange]) -> None:
        if self.run_dir is None:
            return
        for change in found:
            self.run_dir.replica(change)
