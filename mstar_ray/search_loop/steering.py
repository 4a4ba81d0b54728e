"""What steers each reflection beyond its parent: which of an ensemble's reflector models answers it
(``reflect.ensemble``) and which of the evolving instructions it is given (``reflect.guidance``), with the
meta-step that rewrites the worst instruction. The policy calls it at three points (a reflection starts, a
reflection comes back, a resume); everything it decides from is the search state, so a resume continues
from the logs. Ray-free."""

from __future__ import annotations

import random

from mstar_ray.llm.ledger import RoleUsage
from mstar_ray.reflect.ensemble import choose
from mstar_ray.reflect.guidance import guidance_id, rewrite_due, seed_texts
from mstar_ray.reflect.reflector import ReflectionOutcome
from mstar_ray.reflect.request import ReflectionRequest
from mstar_ray.run_config import RunConfig
from mstar_ray.run_config import GuidanceConfig
from mstar_ray.state.reflector_yield import arms_by, book, model_arms
from mstar_ray.state.search_state import SearchState
from mstar_ray.state.transitions import GuidanceRewritten, ReflectionStarted


class Steering:
    def __init__(self, config: RunConfig):
        self.config = config
        cfg = config.search
        self.ensemble = config.reflector_arms()  # the models of llm.reflector's list, or search.ensemble's stand-ins
        self.spend: dict[str, RoleUsage] = {}  # the reflector's by model (a replay's on a resume)
        self.guidance_seeds = seed_texts(cfg.guidance.size) if cfg.guidance is not None else []
        self.rewrite_asked = False  # one meta-step at a time

    def restored(self, state: SearchState) -> None:
        self.spend = {model: usage.model_copy() for model, usage in state.reflector_usage.items()}

    def started(self, request: ReflectionRequest, state: SearchState) -> ReflectionStarted:
        """The reflection's transition, with its model and instruction chosen (and set on ``request``)."""
        model = reason = guidance = None
        cfg = self.config.search
        if request.kind == "improve" and self.ensemble:
            arms = model_arms(state, self.spend, self.ensemble, cfg.ensemble)
            choice = choose([a for a in arms if a.model in self.ensemble],
                            random.Random(f"{self.config.search.seed}:model:{request.iteration}"),
                            self.config.llm.ensemble_exploration)
            request.model, model, reason = choice.model, choice.model, choice.reason
        if request.kind == "improve" and self.config.search.guidance is not None:
            guidance = self._draw_guidance(request, state, self.config.search.guidance)
        return ReflectionStarted(iteration=request.iteration, kind=request.kind, model=model, reason=reason,
                                 guidance=guidance)

    def finished(self, request: ReflectionRequest, outcome: ReflectionOutcome,
                 state: SearchState) -> GuidanceRewritten | None:
        """Books the reflection's spend; a meta-step's new instruction, if it brought one to apply."""
        for call in outcome.calls:
            if call.role == "reflector":
                book(self.spend, call.model, call)
        if request.rewrite is None:
            return None
        self.rewrite_asked = False
        texts = self.texts(state)
        if outcome.guidance is None or guidance_id(outcome.guidance) in texts or request.rewrite.worst.id not in texts:
            return None  # nothing usable, a text already there, or its place was taken meanwhile
        return GuidanceRewritten(replaced=request.rewrite.worst.id, by=guidance_id(outcome.guidance),
                                 text=outcome.guidance, iteration=request.iteration)

    def texts(self, state: SearchState) -> dict[str, str]:
        """The instruction population now: the starting texts with each rewrite in its replaced text's place."""
        texts = {g.id: g.text for g in self.guidance_seeds}
        for rewrite in state.guidance_rewrites:
            texts = {(rewrite.by if k == rewrite.replaced else k): (rewrite.text if k == rewrite.replaced else v)
                     for k, v in texts.items()}
        return texts

    def _draw_guidance(self, request: ReflectionRequest, state: SearchState, cfg: GuidanceConfig) -> str:
        texts = self.texts(state)
        arms = arms_by(state, state.guidance_of, list(texts))
        drawn = choose([a for a in arms if a.model in texts],
                       random.Random(f"{self.config.search.seed}:guidance:{request.iteration}"), cfg.exploration)
        request.guidance = texts[drawn.model]
        if not self.rewrite_asked:
            request.rewrite = rewrite_due(arms, texts, sum(a.judged for a in arms), cfg.rewrite_every,
                                          len(state.guidance_rewrites))
            self.rewrite_asked = request.rewrite is not None
        return drawn.model
