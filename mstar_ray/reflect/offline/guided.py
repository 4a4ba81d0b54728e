"""The offline reflector (``search.reflector: offline``): no model, generic program edits chosen from the
request's failures, their stages and the lineage."""

from __future__ import annotations

import random
from typing import ClassVar
from typing import TYPE_CHECKING

from mstar_ray.program_id import program_id
from mstar_ray.reflect.base import ReflectorSetup
from mstar_ray.reflect.guidance import offline_rewrite
from mstar_ray.reflect.reflector import Child, Discard, SmokeTest, check_child
from mstar_ray.reflect.request import ReflectionRequest
from mstar_ray.reflect.v4a import PatchError, apply_patch, make_patch

if TYPE_CHECKING:
    from mstar_ray.reflect.offline import Mutation


class OfflineReflector:
    """No model: a generic program mutation (``mstar_ray.reflect.offline``), written as a V4A patch and
    applied through the same path as a model's patch. A failed check is answered with another mutation.
    The edit is chosen from the request's failures, their stages and the lineage (``offline.reflect``)."""

    name: ClassVar[str] = "offline"
    needs_model: ClassVar[bool] = False
    fixes_runtime: ClassVar[bool] = False  # a mutation is no fix for what a program did at run time

    @classmethod
    def make(cls, setup: ReflectorSetup) -> OfflineReflector:
        return cls(max_repairs=setup.max_repairs)

    def __init__(self, *, max_repairs: int = 3):
        self.max_repairs = max_repairs

    def _propose(self, request: ReflectionRequest, rng: random.Random, rejected: list[str]) -> Mutation:
        from mstar_ray.reflect.offline import reflect

        return reflect(request.parent_source, request.donors, rng, failures=request.failures,
                       stage_counts=request.stage_counts, lineage=request.lineage, relatives=request.relatives,
                       run_inert=request.inert_parts,
                       exclude=rejected,
                       frozen_code=request.frozen_code, frozen_instructions=request.frozen_instructions)

    def reflect(self, request: ReflectionRequest, smoke: SmokeTest) -> Child | Discard:
        from mstar_ray.reflect.offline import NoMutation

        limit = self.max_repairs + 1
        if request.kind == "runtime_fix":
            return Discard(parent=request.parent_id, reason="the offline reflector cannot fix runtime violations",
                           attempts=0, errors=[request.violation or ""])
        rng = random.Random(request.seed)
        errors: list[str] = []
        rejected: list[str] = []  # descriptions of mutations that failed their check: not proposed again
        for attempt in range(1, limit + 1):
            mutation = None
            try:
                mutation = self._propose(request, rng, rejected)
                patch = make_patch(request.parent_source, mutation.source)
                source = apply_patch(request.parent_source, patch).source
                error = check_child(request.parent_source, source, request, smoke)
            except (NoMutation, PatchError) as exc:
                error = str(exc)
            if error is None:
                assert mutation is not None, "a child was checked, so a mutation was proposed"
                return Child(
                    id=program_id(source), source=source, parent=request.parent_id, origin=f"mutation:{mutation.kind}",
                    commit_message=mutation.description, iteration=request.iteration, patch=patch, edit_format="mutation",
                    attempts=attempt,
                    errors=errors,
                )
            errors.append(error)
            if mutation is not None:
                rejected.append(mutation.description)
        return Discard(parent=request.parent_id, reason=f"no valid child after {limit} attempts", attempts=limit, errors=errors)

    def rewrite_guidance(self, request: ReflectionRequest) -> str | None:
        # the stand-in meta-step: no model reads the texts, so the best one is extended by a drawn phrase
        assert request.rewrite is not None, "asked only with a rewrite"  # reflector.answer checks it
        return offline_rewrite(request.rewrite, request.seed)
