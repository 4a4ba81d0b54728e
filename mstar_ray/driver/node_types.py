"""What nodes the cluster has or can start, and whether each actor request fits one of them: checked at the
start of a run, so that a request no node type can hold (a resource nobody defined) stops the run at once,
naming the resource, instead of waiting forever for a node that never comes.

The node types are the autoscaler's own: the config its monitor reads (``ray up``'s bootstrap config, on the head,
where the driver runs) or the cluster config the autoscaler reports to the GCS (Ray's v2 autoscaler). A cluster
without an autoscaler is the nodes it has. An autoscaler whose config this process cannot read (it runs in
another container, as KubeRay's does) leaves the check undone: Ray's autoscaler then only logs a request that no
node type fits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from mstar_ray.serve import fit


class NodeShape(BaseModel):
    """A node type (or a node that exists): what one node offers, and how many of it there can be."""

    model_config = ConfigDict(frozen=True)
    name: str
    resources: dict[str, float]
    max_count: int = 1


def shapes_of_autoscaling_config(config: dict[str, Any]) -> list[NodeShape]:
    """The node types of a ``ray up`` config (``available_node_types``)."""
    head = config.get("head_node_type")
    return [NodeShape(name=name, resources=spec.get("resources", {}),
                      max_count=1 if name == head else int(spec.get("max_workers", config.get("max_workers", 0))))
            for name, spec in config.get("available_node_types", {}).items()]


def _fmt(resources: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(resources.items())) + "}"


def unmet(request: dict[str, float], shapes: list[NodeShape]) -> str | None:
    """Why no node of ``shapes`` can hold ``request`` (one actor's ask), or None if one can."""
    asked = {name: amount for name, amount in request.items() if amount > 0}
    if fit.fits_somewhere(asked, [shape.resources for shape in shapes if shape.max_count > 0]):
        return None
    offered = {name for shape in shapes if shape.max_count > 0 for name, amount in shape.resources.items() if amount > 0}
    missing = sorted(name for name in asked if name not in offered)
    types = ", ".join(f"{s.name} {_fmt({k: v for k, v in s.resources.items() if not k.startswith('node:')})}"
                      for s in shapes if s.max_count > 0)
    if missing:
        return f"no node type provides {', '.join(missing)} (the cluster's node types: {types})"
    return f"no single node type offers {_fmt(asked)} together (the cluster's node types: {types})"


def capacity(shapes: list[NodeShape]) -> dict[str, float]:
    """What the cluster holds when every node type is at its maximum."""
    total: dict[str, float] = {}
    for shape in shapes:
        for name, amount in shape.resources.items():
            total[name] = total.get(name, 0.0) + amount * shape.max_count
    return total


# ------------------------------------------------------------------------------------ read from a running Ray

def _monitor_argv(status: dict[str, Any]) -> list[str] | None:
    """The command line of the autoscaler's monitor, if it runs on this machine (a process of another container
    or machine is not ours to read: None)."""
    pid = status.get("monitor_pid")
    if pid is None:
        return None
    try:
        argv = Path(f"/proc/{int(pid)}/cmdline").read_bytes().decode().split("\0")
    except (TypeError, ValueError, OSError):
        return None
    return argv if any(arg.endswith("monitor.py") for arg in argv) else None


def _autoscaling_config_path(argv: list[str]) -> Path | None:
    """The config the monitor was started with; None for one that only watches the nodes there are."""
    for i, arg in enumerate(argv):
        if arg.startswith("--autoscaling-config="):
            return Path(arg.split("=", 1)[1]).expanduser()
        if arg == "--autoscaling-config" and i + 1 < len(argv):
            return Path(argv[i + 1]).expanduser()
    return None


def autoscaler_status() -> dict[str, Any] | None:
    """The autoscaler's last report (what ``ray status`` prints), or None without one."""
    from ray._private import ray_constants
    from ray.experimental.internal_kv import _internal_kv_get

    raw = _internal_kv_get(ray_constants.DEBUG_AUTOSCALING_STATUS)
    status: dict[str, Any] | None = json.loads(raw) if raw else None  # the autoscaler's JSON report
    return status


def cluster_shapes() -> tuple[list[NodeShape] | None, str, bool]:
    """The node types the cluster can start (its autoscaler's), else the nodes it has; None when an autoscaler
    scales the cluster by types this process cannot read. The text says where they came from; the flag whether
    they are node types (an autoscaler's) rather than the nodes there are."""
    import ray
    from ray._private.state import state

    alive = [NodeShape(name=f"node {n['NodeID'][:8]}", resources=n["Resources"]) for n in ray.nodes() if n["Alive"]]
    reported = state.get_cluster_config()
    if reported is not None and reported.node_group_configs:
        groups = [NodeShape(name=g.name, resources=dict(g.resources), max_count=g.max_count if g.max_count >= 0 else 10**6)
                  for g in reported.node_group_configs]
        return groups, "the autoscaler's node types", True
    status = autoscaler_status()
    if status is None:
        return alive, "the cluster's nodes (no autoscaler)", False
    argv = _monitor_argv(status)
    if argv is None:
        return None, "", False
    path = _autoscaling_config_path(argv)
    if path is None:  # a local Ray, or nodes started by hand: the autoscaler only watches them
        return alive, "the cluster's nodes (no node types to scale)", False
    return shapes_of_autoscaling_config(yaml.safe_load(path.read_text())), f"the node types of {path}", True
