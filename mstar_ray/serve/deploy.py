"""Deploying the ``serve`` section with Ray Serve before a run, waiting until every replica is healthy,
watching the replicas while it runs, and shutting them down after it (or keeping them for the next run).

One Serve application per model, named as the model, at the route ``/NAME``: the roles that name it call
``http://PROXY:PORT/NAME/v1``. Its one deployment is named after the model's settings
(``ServedModel.deployment_name``), so a kept application that a later run finds is reused only when that
run asks for the same settings; otherwise Serve replaces it.

Serve's proxy runs on the head node only: the driver knows its one address before any worker starts, and
every node reaches it (on a machine that simulates several nodes, proxies on every node would all want the
same port)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import ray
from ray import serve
from ray.serve.schema import ApplicationDetails, ProxyStatus, ServeInstanceDetails

from mstar_ray.llm.errors import EndpointError
from mstar_ray.serve import fit
from mstar_ray.serve.config import ServeConfig, ServedModel
from mstar_ray.serve.replicas import ReplicaChange, ReplicaRecord, changes

POLL_S = 0.25  # between looks while waiting for replicas to start
WATCH_S = 2.0  # between looks during the run
HEALTH_CHECK_PERIOD_S = 5.0  # Serve's check of each replica (a dead server process is found within this)
ANY_HOST = ("0.0.0.0", "::", "")

Say = Callable[[str], None]


class ServeError(EndpointError):
    """A served model that cannot be used: its replicas cannot be placed, do not start, or fail."""


def details() -> ServeInstanceDetails:
    """Serve's own report of its applications, deployments and replicas (what ``serve status`` and the
    dashboard show), read from its controller: the dashboard may not run (a local Ray starts without it)."""
    from ray.serve.context import _get_global_client

    return ServeInstanceDetails(**_get_global_client().get_serve_details())  # type: ignore[union-attr]  # raises, never None, without a controller (the default)


def deployment_options(model: ServedModel) -> dict[str, Any]:
    """Replicas, resources and health checks of the model's deployment, as ``serve.deployment`` takes them."""
    options: dict[str, Any] = {"ray_actor_options": model.resources.ray_options(),
                     "health_check_period_s": HEALTH_CHECK_PERIOD_S}
    if isinstance(model.replicas, int):
        options["num_replicas"] = model.replicas
    else:
        options["autoscaling_config"] = {"min_replicas": model.replicas.min, "max_replicas": model.replicas.max,
                                         "initial_replicas": model.replicas.min, "target_ongoing_requests": 1}
    if model.ongoing is not None:
        options["max_ongoing_requests"] = model.ongoing
    return options


class Serving:
    """The served models of one run: ``start`` deploys (or reuses) and waits, ``look`` reports what changed
    among their replicas since the last look, ``stop`` deletes their applications unless kept."""

    def __init__(self, config: ServeConfig, say: Say):
        self.config = config
        self.say = say
        self.urls: dict[str, str] = {}
        self.replicas: dict[str, ReplicaRecord] = {}
        self._deployed: list[str] = []  # applications this run (re)deployed or reused: the ones it may stop
        self._reused: set[str] = set()  # replicas a kept application already had
        self._looked_at = 0.0

    # ------------------------------------------------------------------------------------------ start

    def start(self, *, local_ray: bool, beside: dict[str, float] | None = None) -> list[ReplicaChange]:
        """Deploy every model (reusing kept ones), wait until all replicas are healthy, and return them as
        ``started`` changes (placement and start-up time). ``beside``: what else must still fit (one
        evaluator), checked with the replicas' minimum against the nodes. On a local Ray nothing can be
        added, so what cannot fit is refused at once; on a cluster the autoscaler may add nodes, so the wait
        decides (``start_timeout_s``). Raises ``ServeError`` naming the model's key."""
        self._check_fit(local_ray, beside or {})
        self._start_serve()
        found = details()
        targets = []
        for index, model in enumerate(self.config.models):
            app = found.applications.get(model.name)
            if app is not None and set(app.deployments) == {model.deployment_name} and app.status == "RUNNING":
                self.say(f"serve.models[{index}] {model.name}: reusing the deployment an earlier run kept")
                self._reused |= {r.replica_id for d in app.deployments.values() for r in d.replicas}
            else:
                if app is not None:
                    why = ("Serve LLM names its deployments itself, so a kept vllm application is not known to have "
                           "these settings" if model.runtime == "vllm" else "it has other settings")
                    self.say(f"serve.models[{index}] {model.name}: an application of that name is running ({why}); "
                             "Serve replaces it")
                targets.append(model)
            self._deployed.append(model.name)
        if targets:
            self.say(f"deploying {', '.join(m.name for m in targets)} with Ray Serve ...")
        self._deploy([m for m in targets if m.runtime == "llama_cpp"])
        for model in targets:
            if model.runtime == "vllm":
                self._deploy_vllm(model)
        started = self._wait()
        self.urls = {model.name: self._url(model) for model in self.config.models}
        return started

    def _start_serve(self) -> None:
        """Serve's controller and its HTTP proxy, the proxy healthy, within ``start_timeout_s``. ``serve.start``
        waits on the first proxy actor only, and the controller gives a proxy 5 s to say it is ready before it
        kills it and starts another: on a busy machine ``serve.start`` then raises (the actor killed) while Serve
        goes on. Starting again connects to that controller; then wait for the proxy Serve itself reports
        healthy, so the run's first calls find it."""
        deadline = time.monotonic() + self.config.start_timeout_s
        while True:
            try:
                http = {"host": self.config.host, "port": self.config.port}
                serve.start(http_options=http, proxy_location="HeadOnly")
                break
            except (ray.exceptions.RayActorError, TimeoutError) as exc:
                if time.monotonic() > deadline:
                    raise ServeError(f"serve: Ray Serve's HTTP proxy did not start within "
                                     f"{self.config.start_timeout_s:g} s (serve.start_timeout_s): "
                                     f"{type(exc).__name__}: {exc}") from None
                self.say(f"serve: Ray Serve's HTTP proxy did not start in time ({type(exc).__name__}); "
                         "waiting for the one Serve starts next")
                time.sleep(POLL_S)
        while not any(p.status == ProxyStatus.HEALTHY for p in details().proxies.values()):
            if time.monotonic() > deadline:
                raise ServeError(f"serve: Ray Serve's HTTP proxy not healthy after {self.config.start_timeout_s:g} s "
                                 "(serve.start_timeout_s)")
            time.sleep(POLL_S)

    @staticmethod
    def _deploy(models: list[ServedModel]) -> None:
        """Hand the llama.cpp applications to Serve without waiting: ``_wait`` watches them start."""
        if not models:
            return
        from mstar_ray.serve.llama_cpp import deployment

        targets = [serve.RunTarget(target=deployment(m, deployment_options(m)), name=m.name, route_prefix=f"/{m.name}")
                   for m in models]
        serve.run_many(targets, wait_for_ingress_deployment_creation=False, wait_for_applications_running=False)

    def _deploy_vllm(self, model: ServedModel) -> None:
        from mstar_ray.serve import vllm

        index = self.config.models.index(model)
        try:
            vllm.deploy(model, deployment_options(model), timeout_s=self.config.start_timeout_s)
        except Exception as exc:  # noqa: BLE001 - whatever the GPU node's task raised, or its timeout
            self._delete_ours()
            raise ServeError(f"serve.models[{index}] ({model.name}): Ray Serve LLM could not deploy it from a GPU "
                             f"node: {type(exc).__name__}: {exc}") from None

    def _check_fit(self, local_ray: bool, beside: dict[str, float]) -> None:
        nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
        asks = [(f"serve.models[{i}] ({m.name}): a replica", m.resources.ask())
                for i, m in enumerate(self.config.models) for _ in range(m.min_replicas)]
        failed, left = fit.place(asks, nodes)
        if failed is None and beside and not fit.fits_somewhere(beside, left):
            failed = f"serve.models: beside the replicas, no evaluator ({fit.describe(beside)})"
        if failed is None:
            return
        offered = "; ".join(fit.describe(n) for n in nodes) or "no node"
        problem = (f"{failed} cannot be placed: the replicas' resources (serve.models[].resources, "
                   f"{len(asks)} replicas at their minimum) do not fit the nodes ({offered})")
        if local_ray:
            raise ServeError(f"{problem}; lower the resources or replicas, or run on a cluster (--address)")
        self.say(f"{problem} yet: waiting up to {self.config.start_timeout_s:g} s for the cluster to add nodes")

    def _wait(self) -> list[ReplicaChange]:
        started = time.monotonic()
        seen: list[ReplicaChange] = []
        while True:
            found = details()
            pending = []
            for index, model in enumerate(self.config.models):
                app = found.applications.get(model.name)
                status = app.status if app is not None else "NOT_STARTED"
                if app is not None and status == "DEPLOY_FAILED":
                    self._delete_ours()
                    raise ServeError(f"serve.models[{index}] ({model.name}): its replicas did not start: "
                                     f"{_messages(app)}")
                if status != "RUNNING":
                    pending.append((index, model, app))
            new, self.replicas = self._changes(found)
            seen += new
            if not pending:
                return seen
            if time.monotonic() - started > self.config.start_timeout_s:
                self._delete_ours()
                index, model, app = pending[0]
                raise ServeError(f"serve.models[{index}] ({model.name}): not healthy after "
                                 f"{self.config.start_timeout_s:g} s (serve.start_timeout_s): "
                                 f"{_messages(app) if app else 'not deployed'}")
            time.sleep(POLL_S)

    def _url(self, model: ServedModel) -> str:
        found = details()
        port = found.http_options.port if found.http_options else self.config.port
        host: str | None = found.http_options.host if found.http_options else self.config.host
        if host in ANY_HOST:  # listening on every address: reach it at the head's
            host = next(iter(found.proxies.values())).node_ip
        return f"http://{host}:{port}/{model.name}/v1"

    # ------------------------------------------------------------------------------------------ the run

    def _records(self, found: ServeInstanceDetails) -> dict[str, ReplicaRecord]:
        records = {}
        for name in self._deployed:
            app = found.applications.get(name)
            for deployment in (app.deployments.values() if app else ()):
                for r in deployment.replicas:
                    records[r.replica_id] = ReplicaRecord(
                        app=name, deployment=deployment.name, replica_id=r.replica_id, node_id=r.node_id or "",
                        node_ip=r.node_ip or "", pid=r.pid, state=str(getattr(r.state, "value", r.state)),
                        started_at=r.start_time_s, reused=r.replica_id in self._reused)
        return records

    def _changes(self, found: ServeInstanceDetails) -> tuple[list[ReplicaChange], dict[str, ReplicaRecord]]:
        return changes(self.replicas, self._records(found), time.time())

    def look(self, *, force: bool = False) -> list[ReplicaChange]:
        """What changed among the replicas since the last look: a replica lost (Serve restarts it) and its
        replacement healthy. At most every ``WATCH_S`` unless forced; advisory, so a look that fails (the
        controller busy restarting) reports nothing rather than stop the run."""
        now = time.monotonic()
        if not self._deployed or (not force and now - self._looked_at < WATCH_S):
            return []
        self._looked_at = now
        try:
            found = details()
        except Exception as exc:  # noqa: BLE001 - any controller trouble: look again next time
            self.say(f"serve: could not read the replicas' state ({type(exc).__name__}: {exc})")
            return []
        new, self.replicas = self._changes(found)
        for change in new:
            self.say(f"serve: {change.detail}")
        return new

    def stop(self) -> list[ReplicaChange]:
        """Delete this run's applications unless ``keep``; the replicas shut down, as ``finished`` changes."""
        if not self._deployed:
            return []
        if self.config.keep:
            self.say(f"serve: keeping {', '.join(self._deployed)} for the next run (serve.keep)")
            return []
        ended = [ReplicaChange(kind="finished", record=r, detail=f"{r.describe()}: shut down at the run's end")
                 for r in self.replicas.values() if r.state == "RUNNING"]
        self._delete_ours()
        return ended

    def _delete_ours(self) -> None:
        for name in self._deployed:
            try:
                serve.delete(name)
            except Exception as exc:  # noqa: BLE001 - shutting down: say it and go on with the others
                self.say(f"serve: could not delete {name}: {exc}")
        self._deployed = []
        self.replicas = {}


def _messages(app: ApplicationDetails) -> str:
    """Serve's own words on why an application is not running: the application's and its deployments'."""
    texts = [app.message] if app.message else []
    texts += [f"{d.name}: {d.message}" for d in app.deployments.values() if d.message]
    return " | ".join(texts) or f"status {app.status}"
