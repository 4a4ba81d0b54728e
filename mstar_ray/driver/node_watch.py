"""The cluster's nodes as a run sees them: which joined and left since the last look (said in the run's output),
how many of each node type are up and how many the autoscaler is starting (the live line and ``status``)."""

from __future__ import annotations

import time

from mstar_ray.driver.node_types import autoscaler_status

LOOK_EVERY_S = 2.0


def node_summary(types: dict[str, str], starting: int) -> str:
    """``2 cpu_spot, 1 gpu_model (+1 starting)``: the worker nodes up by type, and those on their way."""
    counts: dict[str, int] = {}
    for kind in types.values():
        counts[kind] = counts.get(kind, 0) + 1
    text = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none"
    return text + (f" (+{starting} starting)" if starting else "")


class NodeWatch:
    def __init__(self) -> None:
        self.nodes: dict[str, str] = {}  # node id -> its type (or "node" where the autoscaler names none)
        self.starting = 0
        self.summary = ""
        self.seen_workers = False  # a one-machine run never has any, and its live line says nothing of nodes
        self._looked = 0.0

    def look(self, *, force: bool = False) -> list[str]:
        """At most every few seconds: the worker nodes now; returns a line for each that joined or left."""
        import ray

        now = time.monotonic()
        if not ray.is_initialized():  # a simulation's stand-in workers (scripts/bench_scale.py): no nodes
            return []
        if not force and now - self._looked < LOOK_EVERY_S:
            return []
        self._looked = now
        status = autoscaler_status() or {}
        report = status.get("autoscaler_report") or {}
        mapping = report.get("node_type_mapping") or {}
        head = ray.get_runtime_context().get_node_id()  # the driver's: the head, which is not a worker
        current = {}
        for node in ray.nodes():
            if node["Alive"] and node["NodeID"] != head:
                kind = mapping.get(node["NodeID"]) or mapping.get(node["NodeManagerAddress"]) or "node"
                current[node["NodeID"]] = kind
        lines = [f"node joined: {kind} {node_id[:8]}…{node_id[-5:]}" for node_id, kind in current.items()
                 if node_id not in self.nodes]
        lines += [f"node left: {kind} {node_id[:8]}…{node_id[-5:]}" for node_id, kind in self.nodes.items()
                  if node_id not in current]
        self.nodes = current
        self.starting = sum((report.get("pending_launches") or {}).values()) + len(report.get("pending_nodes") or [])
        self.seen_workers = self.seen_workers or bool(current or self.starting)
        self.summary = node_summary(current, self.starting) if self.seen_workers else ""
        return lines
