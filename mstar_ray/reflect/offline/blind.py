"""The blind offline reflector (``search.reflector: offline-random``, an ablation): the offline reflector's
path with each edit drawn at random, not chosen from the failures."""

from __future__ import annotations

import random
from typing import ClassVar
from typing import TYPE_CHECKING

from mstar_ray.reflect.offline.guided import OfflineReflector
from mstar_ray.reflect.request import ReflectionRequest

if TYPE_CHECKING:
    from mstar_ray.reflect.offline import Mutation


class RandomOfflineReflector(OfflineReflector):
    name: ClassVar[str] = "offline-random"

    def _propose(self, request: ReflectionRequest, rng: random.Random, rejected: list[str]) -> Mutation:
        from mstar_ray.reflect.offline import propose

        return propose(request.parent_source, request.donors, rng, frozen_code=request.frozen_code,
                       frozen_instructions=request.frozen_instructions)
