"""Which program, and where it came from: the one record of a program's identity, which every later record
of it (a queued candidate, a population member) is made of instead of restating its fields."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class ProgramIdentity(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str  # content-hashed: mstar_ray.program_id.program_id(source)
    source: str
    parent: str | None  # None for a seed
    origin: str  # seed | reflection | mutation:<kind> | runtime-fix
    commit_message: str
    iteration: int  # the reflection round that made it (0 for seeds)

    def identity(self) -> dict[str, Any]:
        """The identity fields alone, to build another record of the same program from."""
        return {name: getattr(self, name) for name in ProgramIdentity.model_fields}
