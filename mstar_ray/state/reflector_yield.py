"""Each reflector model's spend and yield in a run, counted from its search state: the records an ensemble's
bandit chooses by (``mstar_ray.reflect.ensemble``) and that ``status`` and the report show. Live and after a
resume alike, since the state is what the logs replay to (which reflection went to which model is its
``ReflectionStarted`` row; the spend, the reflector's ``llm_calls`` by model, or for an offline stand-in, its
nominal price per reflection from ``search.ensemble``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mstar_ray.llm.ledger import RoleUsage
from mstar_ray.llm.usage import CallLog
from mstar_ray.reflect.ensemble import Arm
from mstar_ray.state.search_state import SearchState

if TYPE_CHECKING:
    from mstar_ray.run_config import RunConfig


def book(usage: dict[str, RoleUsage], key: str, call: CallLog) -> None:
    """Counts an answered (not cached) ``call`` under ``key`` of ``usage``."""
    if not call.cache_hit:
        usage.setdefault(key, RoleUsage()).add(RoleUsage(calls=1, prompt_tokens=call.prompt_tokens,
                                                         completion_tokens=call.completion_tokens, cost_usd=call.cost_usd))


def model_arms(state: SearchState, spend: dict[str, RoleUsage], models: list[str] | None = None,
               nominal: dict[str, float] | None = None) -> list[Arm]:
    """One record per model: ``models`` (those configured now, in order) first, then any other the run's
    history names (a model dropped from the list on a resume is still reported, never chosen). A model with a
    ``nominal`` price (an offline stand-in's, per reflection) has spent that price per reflection."""
    arms = arms_by(state, state.reflector_models, models, spend)
    for arm in arms:
        if nominal and arm.model in nominal:
            arm.spend_usd = nominal[arm.model] * arm.reflections
    return arms


def run_arms(config: RunConfig, state: SearchState) -> list[Arm]:
    """The records ``status`` and the report show: the arms configured now, then any other the logs name."""
    return model_arms(state, state.reflector_usage, config.reflector_arms(), config.search.ensemble)


def arms_by(state: SearchState, assigned: dict[int, str], names: list[str] | None = None,
            spend: dict[str, RoleUsage] | None = None) -> list[Arm]:
    """One record per name that ``assigned`` (by iteration: a reflector model, an instruction's id) gives the
    improve reflections: ``names`` first, in order, then any other the history or ``spend`` names."""
    spend = spend or {}
    names = list(names or [])
    names += [m for m in [*assigned.values(), *spend] if m not in names]
    arms = {name: Arm(model=name) for name in names}
    for name, usage in spend.items():
        arms[name].spend_usd, arms[name].calls = usage.cost_usd, usage.calls
    children = {m.iteration: m for m in state.members if m.origin not in ("seed", "runtime-fix")}
    unjudged = state.open_reflections | {c.iteration for c in state.pending.values() if c.origin != "runtime-fix"}
    for iteration, name in assigned.items():
        arm = arms[name]
        arm.reflections += 1
        if iteration in unjudged:
            continue
        arm.judged += 1
        child = children.get(iteration)
        if child is not None:
            arm.entered += 1
            parent = state.score_of(child.parent) if child.parent else None
            arm.lead += max(0.0, child.score - parent) if parent is not None else 0.0
    return list(arms.values())


def yield_lines(arms: list[Arm]) -> list[str]:
    """The spend and yield per model, one line each, for ``status`` and the report."""
    lines = []
    for arm in arms:
        per_dollar = f"{arm.gain / arm.spend_usd:.3g} gain per $" if arm.spend_usd > 0 else "no spend"
        spent = f"over {arm.calls} calls" if arm.calls else "nominal"  # a stand-in calls no model
        lines.append(f"{arm.model}: {arm.reflections} reflections ({arm.judged} judged), {arm.entered} children in, "
                     f"lead +{arm.lead:.3f}; ${arm.spend_usd:.4f} {spent}; {per_dollar}")
    return lines
