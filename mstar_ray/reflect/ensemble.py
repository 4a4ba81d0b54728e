"""Which of several reflector models makes the next reflection: a bandit on the improvement its children
bring per dollar.

A reflection's gain is what its child brought: ``ENTRY_CREDIT`` for entering the population (an evaluated
child, not a discard, a duplicate, a violation or one the cascade stopped) plus its lead over its parent when
positive; a reflection that gave none gains nothing. Each model's index is an upper confidence bound on its
gain per reflection, shrunk toward the pooled mean while it has few judged reflections, divided by what one of
its reflections cost. A model never tried is tried first (in list order). Everything is counted from what the
run logged (``Arm`` records; ``mstar_ray.state.reflector_yield`` rebuilds them from a run's state), so a
resume continues where the run stopped, and a model added to or dropped from the list on a resume is simply
tried, or no longer chosen. Ray-free and pure: the policy feeds it, the report reads the same records.
The arms are models of ``llm.reflector``, or offline stand-ins of ``search.ensemble`` (their cost a nominal
price per reflection); ``ModelEnsemble`` hands each request to the arm chosen for it.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

from pydantic import BaseModel

if TYPE_CHECKING:
    from mstar_ray.reflect.base import Reflecting
    from mstar_ray.reflect.reflector import Child, Discard, SmokeTest
    from mstar_ray.reflect.request import ReflectionRequest

# What entering the population is worth, in static-score points: a child that joins but leads its parent by
# nothing still widens what the next reflections can start from, less than a real lead does.
ENTRY_CREDIT = 0.01
# A model whose reflections cost nothing so far (a local server, every call cached) is costed at this, so
# free models are compared by their gain alone rather than by a division by zero.
MIN_COST_USD = 1e-6


class Arm(BaseModel):
    """One model's record in a run: its reflections, what their children brought, what they cost."""

    model: str
    reflections: int = 0  # started
    judged: int = 0  # whose outcome is known (a discard, a child evaluated or stopped)
    entered: int = 0  # children that joined the population
    lead: float = 0.0  # summed lead of those children over their parents, where positive
    spend_usd: float = 0.0
    calls: int = 0

    @property
    def gain(self) -> float:
        return self.lead + ENTRY_CREDIT * self.entered

    @property
    def cost_per_reflection(self) -> float | None:
        return self.spend_usd / self.reflections if self.reflections and self.spend_usd > 0 else None


class ArmChoice(BaseModel):
    model: str
    reason: str


def choose(arms: list[Arm], rng: random.Random, exploration: float = 1.0) -> ArmChoice:
    """The model for the next reflection among ``arms`` (the models configured now, in their order)."""
    if len(arms) == 1:
        return ArmChoice(model=arms[0].model, reason="the only reflector model")
    for arm in arms:
        if arm.reflections == 0:
            return ArmChoice(model=arm.model, reason="not tried yet")
    judged = sum(a.judged for a in arms)
    pooled_gain = sum(a.gain for a in arms) / judged if judged else ENTRY_CREDIT
    costs = [c for a in arms if (c := a.cost_per_reflection) is not None]
    pooled_cost = sum(costs) / len(costs) if costs else MIN_COST_USD
    scale = max(pooled_gain, ENTRY_CREDIT)
    best: list[tuple[float, Arm, str]] = []
    for arm in arms:
        mean = (arm.gain + pooled_gain) / (arm.judged + 1)  # one pseudo-reflection at the pooled mean
        bonus = exploration * scale * math.sqrt(math.log(judged + 1) / (arm.judged + 1))
        cost = max(arm.cost_per_reflection or pooled_cost, MIN_COST_USD)
        index = (mean + bonus) / cost
        why = (f"best bound on gain per dollar: {index:.4g} (gain {mean:.4f} + exploration {bonus:.4f} per "
               f"reflection over {arm.judged} judged, ${cost:.5f} each)")
        best.append((index, arm, why))
    top = max(index for index, _, _ in best)
    tied = [(arm, why) for index, arm, why in best if index >= top * (1 - 1e-12)]
    arm, why = tied[rng.randrange(len(tied))] if len(tied) > 1 else tied[0]
    return ArmChoice(model=arm.model, reason=why)


class ModelEnsemble:
    """Several reflectors, one per arm of an ensemble (the models of an ``llm.reflector`` list, or the offline
    stand-ins of ``search.ensemble``): the policy names the arm of each request (``choose`` picks it); a
    request naming none goes to the first."""

    def __init__(self, members: dict[str, Reflecting], listed_in: str = "llm.reflector"):
        self.members = members
        self.listed_in = listed_in  # where the arms are configured, for the message of a dropped one

    def _member(self, request: ReflectionRequest) -> Reflecting | None:
        return self.members.get(request.model or next(iter(self.members)))

    def reflect(self, request: ReflectionRequest, smoke: SmokeTest) -> Child | Discard:
        from mstar_ray.reflect.reflector import Discard

        member = self._member(request)
        if member is None:  # a request made before a resume that changed the list
            return Discard(parent=request.parent_id, reason=f"the reflector {request.model!r} is no longer "
                           f"configured ({self.listed_in} lists {', '.join(self.members)})", attempts=0, errors=[])
        return member.reflect(request, smoke)

    def rewrite_guidance(self, request: ReflectionRequest) -> str | None:
        member = self._member(request)
        return member.rewrite_guidance(request) if member is not None else None
