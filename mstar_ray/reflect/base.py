"""What a reflector is: the protocol every kind satisfies, and what a process gives it to be built.

A reflector turns a ``ReflectionRequest`` into a checked child or a discard (``reflect.reflector`` holds the
shared checks). The rest of the system never branches on the kind: the config validates the name and whether
the kind needs a model, the policy asks whether it fixes runtime violations, the actor builds it, all through
the registry (``mstar_ray.reflect.registry``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from mstar_ray.llm.client import LLMClient
    from mstar_ray.llm.settings import LLMSettings
    from mstar_ray.reflect.reflector import Child, Discard, SmokeTest
    from mstar_ray.reflect.request import ReflectionRequest


@dataclasses.dataclass(frozen=True)
class ReflectorSetup:
    """What the process that hosts a reflector (the reflector actor, a script) hands it: the run's ``llm``
    settings, its repair rounds and a client per role (``None`` where the role is not configured)."""

    settings: LLMSettings
    max_repairs: int
    client: Callable[[str], LLMClient | None] = lambda role: None
    run_dir: str | None = None  # the run directory, for a kind that reads the run (None: not reachable here)


class Reflecting(Protocol):
    """What answers reflection requests: one reflector, or an ensemble of them (``reflect.ensemble``)."""

    def reflect(self, request: ReflectionRequest, smoke: SmokeTest) -> Child | Discard:
        """A checked child of ``request``'s parent, or a discard with its reasons; never raises for a bad reply."""

    def rewrite_guidance(self, request: ReflectionRequest) -> str | None:
        """The meta-step of evolving instructions (``request.rewrite``): a new text for the worst instruction,
        written from the best; none when no usable text came back."""


class Reflector(Reflecting, Protocol):
    name: ClassVar[str]  # its ``search.reflector`` value
    needs_model: ClassVar[bool]  # whether ``llm.reflector`` must be configured
    fixes_runtime: ClassVar[bool]  # whether a child that broke the contract at run time is sent back to it

    @classmethod
    def make(cls, setup: ReflectorSetup) -> Reflecting:
        """The reflector (or an ensemble of one per configured model), built in the process that runs it."""
