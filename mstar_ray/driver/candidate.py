"""A program on its way to the population: what the driver queues, and what a resume re-queues."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Candidate:
    id: str
    source: str
    parent: str | None
    origin: str
    commit_message: str
    iteration: int
    fix_round: int = 0
    patch: str | None = None
    edit_format: str | None = None
