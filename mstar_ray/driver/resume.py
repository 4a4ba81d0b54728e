"""Resuming a run: the stored config with a new budget and, if given, a new list of reflector models (nothing
else may change). The search's state comes back from the logs through ``mstar_ray.state.replay``."""

from __future__ import annotations

from typing import Any

from mstar_ray.config_file import ConfigError
from mstar_ray.run_config import RunConfig
from mstar_ray.seeds import canonical

# The only settings a resume may change: how much more to spend; and which reflector models (or offline
# stand-ins) answer (an ensemble's bandit rebuilds its records from the logs and tries a new one first:
# mstar_ray.search_loop.steering).
BUDGET_KEYS = ("search.max_candidates", "search.max_iterations", "search.max_wall_s", "llm.budget")
REFLECTOR_KEYS = ("llm.reflector", "llm.prices", "llm.ensemble_exploration", "search.ensemble")


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def _comparable(config: RunConfig) -> dict[str, Any]:
    data = config.model_dump(mode="json")
    data["search"]["seeds"] = [canonical(seed) for seed in data["search"]["seeds"]]
    return data


def merge_resume_config(stored: RunConfig, given: RunConfig | None) -> RunConfig:
    """The stored config with the given one's budget; any other difference is refused, naming the key."""
    if given is None:
        return stored
    before, after = _flatten(_comparable(stored)), _flatten(_comparable(given))
    changed = sorted(k for k in before.keys() | after.keys()
                     if before.get(k) != after.get(k) and not k.startswith(BUDGET_KEYS + REFLECTOR_KEYS))
    if changed:
        raise ConfigError("on resume only the budget and the reflector models may change ("
                          + ", ".join(BUDGET_KEYS + REFLECTOR_KEYS) + "); changed: "
                          + ", ".join(f"{k} ({before.get(k)!r} -> {after.get(k)!r})" for k in changed))
    search = stored.search.model_copy(update={k: getattr(given.search, k)
                                              for k in ("max_candidates", "max_iterations", "max_wall_s", "ensemble")})
    llm = stored.llm.model_copy(update={"budget": given.llm.budget, "reflector": given.llm.reflector,
                                        "prices": given.llm.prices,
                                        "ensemble_exploration": given.llm.ensemble_exploration})
    return stored.model_copy(update={"search": search, "llm": llm})
