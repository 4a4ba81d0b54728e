"""Connecting the driver to Ray: a cluster given by address, or a local Ray sized to this machine."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from mstar_ray.blas import ONE_THREAD
from mstar_ray.driver.node_types import capacity, cluster_shapes, unmet
from mstar_ray.exit_codes import InfrastructureError, InputError
from mstar_ray.run_config import RunConfig
from mstar_ray.search_loop.policy import FatalRunError

# One BLAS thread per process (mstar_ray.blas): evaluators already fill the cores, and threaded BLAS on a busy
# machine is measured 4-20x slower (scripts/bench_subsets.py).
WORKER_ENV = {**ONE_THREAD, "TOKENIZERS_PARALLELISM": "false"}
# Evaluators not up this long after they are asked for are waiting for a node: the run says so.
PLACED_WITHIN_S = 5.0
# Ray gives a node it starts a fixed 30 s to register (ray/_private/node.py), which a busy machine can miss
# (seen at load 45-113 on 2 cores); each further start is a fresh 30 s.
LOCAL_STARTS = 3
_NODE_STARTUP_TIMEOUT = "timed out during startup"
ADDRESS_CHECK_S = 10.0  # a cluster's head across a network answers a TCP connect well within this

logger = logging.getLogger(__name__)


def start_local_ray(**options: object) -> None:
    """``ray.init(address="local", ...)``, started again when Ray's node misses its registration window; after
    ``LOCAL_STARTS`` misses the machine is named as the cause (exit 3), not the user's input."""
    for start in range(1, LOCAL_STARTS + 1):
        try:
            ray.init(address="local", **options)  # type: ignore[arg-type]  # Ray's keyword options, passed through
            return
        except Exception as exc:  # Ray raises a bare Exception for it
            if _NODE_STARTUP_TIMEOUT not in str(exc):
                raise
            ray.shutdown()  # stops what the failed start left running
            if start == LOCAL_STARTS:
                raise InfrastructureError(
                    f"a local Ray did not start: its node missed Ray's 30 s registration window {LOCAL_STARTS} times "
                    "(is this machine overloaded? `uptime` shows its load)") from exc
            logger.warning("Ray's node missed its 30 s registration window (a busy machine?): starting it again "
                           "(%d of %d)", start + 1, LOCAL_STARTS)


def check_listening(address: str) -> None:
    """A ``HOST:PORT`` or ``ray://HOST:PORT`` address that nothing answers on is named at once: Ray's own attempt
    retries a dead GCS address for many minutes, and its client for 30 s before an error naming nothing."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or not host or not port.isdigit():
        return  # "auto" is Ray's to find; anything else, Ray's to refuse
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=ADDRESS_CHECK_S).close()
    except OSError as exc:
        raise InfrastructureError(f"no Ray at {address} (--address or ray.address): {exc.strerror or exc}; start one "
                                  "there (`ray start --head`, or `ray up cluster.yaml`) or give its address") from None


def connect(config: RunConfig, address: str | None) -> dict[str, float]:
    """Start or join Ray; returns the cluster's resources. API keys named in the config travel to remote
    workers by name (never into sandboxes, which start with a clean environment)."""
    address = address or config.ray.address
    env = dict(WORKER_ENV)
    keys = {c.api_key_env for c in config.llm.endpoints().values() if c.api_key_env}
    if config.llm.embedding.api_key_env:
        keys.add(config.llm.embedding.api_key_env)
    env.update({name: os.environ[name] for name in sorted(keys) if name in os.environ})
    if not ray.is_initialized():
        on_sigterm = signal.getsignal(signal.SIGTERM)
        if address:
            check_listening(address)
            ray.init(address=address, runtime_env={"env_vars": env}, log_to_driver=False)
        else:
            # address="local": always a fresh Ray of our own, even when another one runs on this machine
            # (without it Ray would join that one and refuse our num_cpus).
            # Its workers inherit this process's environment: no runtime_env, whose workers could not be the
            # ones Ray starts ahead (each actor would wait for a fresh process).
            os.environ.update(env)
            # Ray enables token authentication for a Ray it starts (making ~/.ray/auth_token if there is none)
            # and warns so at every start, asking to opt out. We keep it (a local Ray listens on this machine's
            # address, not only loopback), so the warning says nothing to act on and is not shown; an explicit
            # RAY_AUTH_MODE is Ray's to honour and it warns about nothing then.
            auth = logging.getLogger("ray._private.authentication.authentication_token_setup")
            level = auth.level
            auth.setLevel(logging.ERROR)
            try:
                start_local_ray(num_cpus=config.ray.num_cpus or os.cpu_count(), include_dashboard=False,
                                log_to_driver=False)
            finally:
                auth.setLevel(level)
        if threading.current_thread() is threading.main_thread():
            # ray.init replaces SIGTERM's handler with a bare exit; the caller's (the CLI's) stops a run cleanly
            signal.signal(signal.SIGTERM, on_sigterm)
    check_requests(config)
    resources: dict[str, float] = ray.cluster_resources()
    return resources


def actor_requests(config: RunConfig, *, served: bool = True) -> dict[str, dict[str, float]]:
    """What one actor of each kind asks of a node, by the config key that sets it (``served``: with the served
    models' replicas)."""
    ray_config = config.ray
    requests = {"ray.evaluator_cpus and ray.evaluator_resources":
                {"CPU": ray_config.evaluator_cpus, **ray_config.evaluator_resources},
                "ray.reflector_cpus": {"CPU": ray_config.reflector_cpus}}
    for index, model in enumerate(config.serve.models if served else []):
        requests[f"serve.models[{index}] ({model.name}).resources"] = model.resources.ask()
    return requests


def check_requests(config: RunConfig) -> None:
    """Every actor's request fits some node the cluster has or its autoscaler can start; otherwise the run
    stops before anything starts, naming the config key and the resource (Ray would queue the actor forever)."""
    shapes, source, node_types = cluster_shapes()
    if shapes is None:  # an autoscaler this process cannot read (another container): Ray's own warnings remain
        return
    # Without node types the served models' replicas are Serve's own check (serve.deploy: all of them at once,
    # beside an evaluator, on the nodes there are); with them, only this one can tell a node that never comes.
    requests = actor_requests(config, served=node_types)
    problems = [f"{key} asks each actor for {_ask(request)}: {why}" for key, request in requests.items()
                if (why := unmet(request, shapes)) is not None]
    if problems:
        raise InputError(f"no node can hold what the run asks for ({source}):\n  " + "\n  ".join(problems))


def _ask(request: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in request.items() if v > 0) + "}"


def schedulable_resources() -> dict[str, float]:
    """The cluster's resources, or what its autoscaler can grow it to if that is more: a search started with no
    worker nodes sizes its pools by the node types, and its actors' requests start the nodes."""
    resources = dict(ray.cluster_resources())
    shapes, _, _ = cluster_shapes()
    for name, amount in capacity(shapes or []).items():
        resources[name] = max(resources.get(name, 0.0), amount)
    return resources


def pool_size(wanted: int, per_actor: float, resources: dict[str, float], extra: dict[str, float]) -> int:
    """How many actors of this kind the cluster can hold at once, at most ``wanted``. A custom resource no
    node offers yet does not count: an autoscaling cluster adds those nodes when actors ask for them."""
    fits = [int(resources.get("CPU", 0) // per_actor)] if per_actor > 0 else []
    fits += [int(resources[name] // amount) for name, amount in extra.items() if amount > 0 and name in resources]
    return max(1, min([wanted, *fits]))


def check_sandboxes(evaluators: list[Any], say: Callable[[str], None] | None = None) -> str:
    """Every evaluator sets up a sandbox once before any work: a node that cannot give a required layer stops
    the run at its start, naming the layer and the fix. Returns the line that says which layers are active.
    Evaluators still without a node after a few seconds are said (an autoscaler is starting nodes for them)."""
    try:
        refs = [actor.sandbox_layers.remote() for actor in evaluators]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=PLACED_WITHIN_S)
        if say is not None and len(ready) < len(refs):
            say(f"waiting: {len(ready)} of the run's {len(refs)} actors are up, the others wait for room on a node "
                "(an autoscaling cluster starts nodes for them)")
        reports = ray.get(refs)
    except (RayActorError, RayTaskError) as exc:
        cause = exc.as_instanceof_cause() if isinstance(exc, RayTaskError) else exc
        raise FatalRunError(f"a worker cannot run sandboxes: {cause}") from None
    missing = sorted({f"{layer} ({reason})" for report in reports for layer, reason in report["missing"].items()})
    return (f"sandbox layers: {', '.join(reports[0]['layers'])}"
            + (f"; not active, as allowed by sandbox.require: {'; '.join(missing)}" if missing else ""))
