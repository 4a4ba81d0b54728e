"""A served model's replica as the run log keeps it (an ``events`` row with ``work: replica``, the record as
its ``data``), and what changed between two looks at the cluster: a replica that became healthy (with where
it runs and how long it took to start) or one that stopped serving. Pure: the driver takes the looks."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ReplicaRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    app: str  # the served model's name
    deployment: str
    replica_id: str
    node_id: str = ""
    node_ip: str = ""
    pid: int | None = None
    state: str  # Serve's: STARTING, RUNNING, UNHEALTHY, STOPPING, ...
    started_at: float  # when Serve started the replica's actor (Unix seconds)
    ready_s: float | None = None  # from its actor's start to the first look that saw it healthy
    reused: bool = False  # kept by an earlier run and served this one too

    def describe(self) -> str:
        took = f" after {self.ready_s:.1f} s" if self.ready_s is not None else ""
        node = self.node_id[:8] if self.node_id else "?"
        return f"replica {self.replica_id} of {self.app} on node {node} ({self.node_ip}), pid {self.pid}{took}"


class ReplicaChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str  # started (healthy) | failed (stopped serving before the run ended) | finished (shut down)
    record: ReplicaRecord
    detail: str


def changes(before: dict[str, ReplicaRecord], now: dict[str, ReplicaRecord], seen_at: float) -> tuple[
        list[ReplicaChange], dict[str, ReplicaRecord]]:
    """What changed from ``before`` to ``now`` (both by replica id; ``now`` as Serve reports it), and the
    records to compare the next look with. A replica is announced once, when first seen RUNNING, with its
    start-up time measured up to ``seen_at``; one that was running and is gone or no longer RUNNING failed."""
    found: list[ReplicaChange] = []
    kept: dict[str, ReplicaRecord] = {}
    for replica_id, record in now.items():
        known = before.get(replica_id)
        if record.state != "RUNNING":
            if known is not None and known.state == "RUNNING":
                lost = known.model_copy(update={"state": record.state})
                found.append(ReplicaChange(kind="failed", record=lost, detail=f"{lost.describe()}: {record.state}"))
            else:
                kept[replica_id] = record
            continue
        if known is not None and known.state == "RUNNING":
            kept[replica_id] = known
            continue
        ready = record if record.reused else record.model_copy(update={"ready_s": max(seen_at - record.started_at, 0.0)})
        kept[replica_id] = ready
        what = "serving (kept by an earlier run)" if record.reused else "healthy"
        found.append(ReplicaChange(kind="started", record=ready, detail=f"{ready.describe()}: {what}"))
    for replica_id, known in before.items():
        if replica_id not in now and known.state == "RUNNING":
            lost = known.model_copy(update={"state": "GONE"})
            found.append(ReplicaChange(kind="failed", record=lost, detail=f"{lost.describe()}: gone"))
    return found, kept
