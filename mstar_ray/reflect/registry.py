"""The reflector kinds, by their ``search.reflector`` name: each a class satisfying
:class:`~mstar_ray.reflect.base.Reflector` in a module of its own, imported on first use (a kind's
dependencies are paid for only by the runs that use it). A new kind is one module and one line here."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module

from mstar_ray.exit_codes import InputError
from mstar_ray.reflect.base import Reflector, ReflectorSetup
from mstar_ray.reflect.base import Reflecting

# name -> (module, class, what it does: the config reference's description of search.reflector)
_REFLECTORS: dict[str, tuple[str, str, str]] = {
    "offline": ("mstar_ray.reflect.offline.guided", "OfflineReflector",
                "generic edits chosen from the failures and lineage"),
    "offline-random": ("mstar_ray.reflect.offline.blind", "RandomOfflineReflector", "drawn blindly (an ablation)"),
    "offline-reader": ("mstar_ray.reflect.offline.reader_stand_in", "OfflineReadingReflector",
                       "the offline reflector, its edit chosen from what it reads first through llm-reader's tools "
                       "(the parent's failures and their stages, the best programs as donors)"),
    "llm": ("mstar_ray.reflect.one_shot", "LLMReflector", "the llm.reflector endpoint, one reply per attempt"),
    "llm-reader": ("mstar_ray.reflect.reading", "ReadingReflector", "the llm.reflector endpoint reading the run "
                   "directory through tools (programs, scores, results, traces, diffs, history) before it answers"),
}
REFLECTOR_NAMES: tuple[str, ...] = tuple(_REFLECTORS)


def describe() -> str:
    """Each kind and what it does, for the config's reference."""
    return "; ".join(f"{name}: {what}" for name, (_, _, what) in _REFLECTORS.items())


def reflector_class(name: str) -> type[Reflector]:
    """The class of the kind called ``name``."""
    if name not in _REFLECTORS:
        raise InputError(f"unknown reflector {name!r}; the reflectors are {', '.join(REFLECTOR_NAMES)}")
    module, cls, _ = _REFLECTORS[name]
    found: type[Reflector] = getattr(import_module(module), cls)
    return found


def make_reflector(name: str, setup: ReflectorSetup, ensemble: Sequence[str] = ()) -> Reflecting:
    """The reflector of ``search.reflector``; with offline stand-ins as an ensemble's arms (``search.ensemble``),
    one of each, every request answered by the arm the policy chose for it."""
    if not ensemble:
        return reflector_class(name).make(setup)
    from mstar_ray.reflect.ensemble import ModelEnsemble

    kinds = [name, *(kind for kind in ensemble if kind != name)]  # ``name`` first: it answers a request naming none
    return ModelEnsemble({kind: reflector_class(kind).make(setup) for kind in kinds}, listed_in="search.ensemble")


__all__ = ["REFLECTOR_NAMES", "Reflector", "ReflectorSetup", "describe", "make_reflector", "reflector_class"]
