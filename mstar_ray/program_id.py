"""Which program, and where it came from.

A program's id is its content: the same source is the same candidate, on any machine, in any run, after any
resume. ``ProgramIdentity`` is the one record of a program's identity, which every later record of it (a
reflector's child, a queued candidate, a population member) is made of instead of restating its fields.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict


def program_id(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


class ProgramIdentity(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str  # program_id(source)
    source: str
    parent: str | None  # None for a seed
    origin: str  # seed | reflection | mutation:<kind> | runtime-fix
    commit_message: str
    iteration: int  # the reflection round that made it (0 for seeds)

    def identity(self) -> dict[str, Any]:
        """The identity fields alone, to build another record of the same program from."""
        return {name: getattr(self, name) for name in ProgramIdentity.model_fields}
