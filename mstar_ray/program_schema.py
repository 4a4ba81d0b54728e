"""The shape of a memory program's schema dataclasses, as seen from outside the sandbox.

The driver never imports candidate code, so the fields of ``KnowledgeItem`` and ``Query`` are read from
the program's syntax tree (see ``mstar_ray.contract``) into these specs. The task agent uses them to tell
the LLM what JSON to produce and to fill it offline.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FieldSpec(BaseModel):
    """One dataclass field.

    ``type`` is the annotation normalised to a small JSON type language:
    ``str``, ``int``, ``float``, ``bool``, ``list[T]``, ``dict[str, T]``, ``any`` (for ``Any``);
    ``optional`` is true for ``Optional[T]`` / ``T | None`` (then ``type`` is ``T``).
    """

    model_config = ConfigDict(frozen=True)

    name: str
    type: str
    description: str = ""
    optional: bool = False
    has_default: bool = False

    @property
    def base(self) -> str:
        """The outer type: ``list`` for ``list[str]``, ``str`` for ``str``."""
        return self.type.split("[", 1)[0]

    @property
    def item_type(self) -> str | None:
        """The element type of a list (``str`` for ``list[str]``), else None."""
        if self.base != "list":
            return None
        return self.type[len("list[") : -1]


class ProgramSchema(BaseModel):
    """The two schema dataclasses of one memory program."""

    model_config = ConfigDict(frozen=True)

    knowledge_item: list[FieldSpec]
    query: list[FieldSpec]
