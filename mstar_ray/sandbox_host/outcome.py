"""What one call into a sandbox produced (``Outcome``), and which of its kinds are the program's violations."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

# Outcome kinds that are the program's fault and, per the contract, score it zero.
VIOLATION_KINDS = frozenset(
    {"timeout", "llm_budget", "embed_budget", "read_too_long", "crashed", "memory", "cpu", "file_size", "disk",
     "forbidden", "thread", "tasks", "protocol", "contract", "recursion", "requests"}
)


class Outcome(BaseModel):
    """What one load/write/read call produced."""

    ok: bool
    value: Any = None
    kind: str | None = None
    message: str = ""
    traceback: str = ""
    llm_calls: int = 0
    seconds: float = 0.0
    queued_seconds: float = 0.0  # of ``seconds``: its toolkit requests queued for shared endpoints (not charged)
    logs: list[str] = []

    @property
    def violation(self) -> bool:
        return self.kind in VIOLATION_KINDS

    def describe(self) -> str:
        return "ok" if self.ok else f"{self.kind}: {self.message}"
