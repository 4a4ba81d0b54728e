"""A program on its way to the population: what the driver queues, and what a resume re-queues."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple
from typing import TypedDict

from mstar_ray.program_id import program_id
from mstar_ray.program_id import ProgramIdentity


class LogFields(TypedDict):
    """Where a candidate came from, as its candidates row and its 'submitted' event say it."""

    parent: str | None
    origin: str
    commit_message: str
    patch: str | None
    edit_format: str | None
    tolerances: list[str]
    structural_key: str | None
    novelty_parent: float | None
    novelty_population: float | None


class Candidate(ProgramIdentity):
    fix_round: int = 0
    patch: str | None = None
    edit_format: str | None = None
    tolerances: list[str] = []
    structural_key: str | None = None
    novelty_parent: float | None = None
    novelty_population: float | None = None

    def log_fields(self) -> LogFields:
        """What every candidates row (and the 'submitted' event, for a resume) says about where it came from."""
        return {"parent": self.parent, "origin": self.origin, "commit_message": self.commit_message, "patch": self.patch,
                "edit_format": self.edit_format, "tolerances": self.tolerances, "structural_key": self.structural_key,
                "novelty_parent": self.novelty_parent, "novelty_population": self.novelty_population}


@dataclass(frozen=True)
class Seed:
    """A program the run starts from: its name (the library's, or the file's stem) and its source."""

    name: str
    source: str

    def candidate(self) -> Candidate:
        return Candidate(id=program_id(self.source), source=self.source, parent=None, origin="seed",
                         commit_message=f"seed {self.name}", iteration=0)


class FixRound(NamedTuple):
    """A runtime fix asked for: the fixed program replaces the failed child, so it takes the child's place in
    the lineage (its parent and iteration), one repair round further."""

    round: int
    parent: str
    iteration: int
