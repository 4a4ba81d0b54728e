"""Task families: how one evaluation item is run by the task agent, with the memory, and scored.

The rest of the system never branches on the family. The write phase is the same for every family (each raw
text: extract a ``KnowledgeItem``, ``kb.write``); then, for each item, the evaluation procedure
(``mstar_ray.agent.evaluation``) hands it to its family's ``run`` with an :class:`~mstar_ray.families.base.ItemRun`:
the memory (``recall(text)``: the agent builds a ``Query`` from the text and the program's ``read()`` answers
it, as many times as the family wants), the agent, which runs the family's own steps (``run.ask``: each a
:class:`~mstar_ray.families.step.Step` bringing its prompt, the reading of the reply and its offline stand-in),
and the judge. The family returns the item's :class:`~mstar_ray.results.ItemResult`: a score in [0, 1], what
the agent produced, and a trace for the reflector. A family is a class satisfying
:class:`~mstar_ray.families.base.Family`, made with no arguments, in a module (or package) of its own: the
package's own are named in ``_FAMILIES`` below (its tasks are loaders in ``mstar_ray.families.task_registry`` that set
``Task.family``; ``choice`` is the smallest, a whole family in one module); a user's own comes with the user's
task adapter (``mstar_ray.tasks.adapter``), which registers it where the task is loaded, and every evaluation job
carries it to its worker.
"""

from __future__ import annotations

from importlib import import_module

from mstar_ray.exit_codes import InputError
from mstar_ray.families.base import Family
from mstar_ray.tasks import adapter

# name -> (module, class): imported on first use, so a family's dependencies (an environment, say) are paid
# for only by the runs that use it.
_FAMILIES: dict[str, tuple[str, str]] = {
    "qa": ("mstar_ray.families.qa", "QuestionAnswering"),
    "rubric": ("mstar_ray.families.rubric", "RubricGraded"),
    "episode": ("mstar_ray.families.episode", "Episodes"),
    "choice": ("mstar_ray.families.choice", "MultipleChoice"),
}
FAMILY_NAMES: tuple[str, ...] = tuple(_FAMILIES)
_made: dict[str, Family] = {}


def family(name: str) -> Family:
    """The family called ``name`` (one instance per process: a family may hold an environment open)."""
    users = adapter.registered(name)
    if users is not None and name in _FAMILIES:
        raise adapter.AdapterError(f"{users.origin}: its family is called {name!r}, as one of the package's: give it another name")
    if name not in _FAMILIES and users is None:
        # the package's loaders name only its own families, so an unknown name comes from a task adapter
        raise InputError(f"unknown task family {name!r}; the families are {', '.join(FAMILY_NAMES)} (or a Family "
                         "class of a task adapter's own)")
    if name not in _made:
        if users is not None:
            _made[name] = adapter.family_class(users)()
        else:
            module, cls = _FAMILIES[name]
            _made[name] = getattr(import_module(module), cls)()
    return _made[name]


__all__ = ["FAMILY_NAMES", "Family", "family"]
