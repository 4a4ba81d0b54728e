"""One entry point that turns a task's options (the ``task`` section of a run config, or ``eval``'s flags)
into a :class:`Task`: every task name, its options model (``mstar_ray.families.task_options``) and its loader.

A task is data for one family (``mstar_ray.families``): a loader reads the user's files (or generates a world)
and returns the texts to write and the items to run, with ``Task.family`` naming how they are run and scored.
Adding a task is a loader and its options model, and one line in ``_TASKS``; nothing else in the system names
tasks. A task of the user's own, from outside the package, is ``task: {adapter: ...}`` (``tasks.adapter``).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, Union

from pydantic import BeforeValidator, Discriminator, Tag, TypeAdapter, ValidationError

from mstar_ray.config_file import describe_errors
from mstar_ray.families import task_options as o
from mstar_ray.tasks.adapter import AdapterTask, adapter_task
from mstar_ray.exit_codes import InputError
from mstar_ray.tasks.model import Task


class _Entry(NamedTuple):
    options: type[o.TaskOptions]
    module: str  # imported on first use, so that picking one task never pays for (or breaks on) the others'
    loader: str  # a function of the module, taking the task's options


_TASKS: dict[str, _Entry] = {
    "locomo": _Entry(o.LocomoOptions, "mstar_ray.families.qa.locomo", "from_config"),
    "synthetic": _Entry(o.SyntheticOptions, "mstar_ray.families.qa.synthetic", "from_config"),
    "beam": _Entry(o.BeamOptions, "mstar_ray.families.qa.beam", "from_config"),
    "jsonl": _Entry(o.JsonlOptions, "mstar_ray.families.qa.jsonl", "from_config"),
    "choice": _Entry(o.ChoiceOptions, "mstar_ray.families.choice.questions", "from_config"),
    "healthbench": _Entry(o.HealthbenchOptions, "mstar_ray.families.rubric.healthbench", "from_config"),
    "prbench": _Entry(o.PrbenchOptions, "mstar_ray.families.rubric.prbench", "from_config"),
    "twc": _Entry(o.TwcOptions, "mstar_ray.families.episode.textworld_games", "twc"),
    "cookingworld": _Entry(o.CookingworldOptions, "mstar_ray.families.episode.textworld_games", "cookingworld"),
    "coin": _Entry(o.CoinOptions, "mstar_ray.families.episode.textworld_games", "coin"),
    "alfworld": _Entry(o.AlfworldOptions, "mstar_ray.families.episode.alfworld_games", "from_config"),
}
TASK_NAMES: tuple[str, ...] = tuple(_TASKS)
ADAPTER = "adapter"  # the tag of a task section naming a user's adapter instead of a task


def _tag(section: Any) -> str:
    if isinstance(section, dict):
        return ADAPTER if "adapter" in section else str(section.get("name", "synthetic"))
    return ADAPTER if isinstance(section, AdapterTask) else section.name


def _flat_record(section: Any) -> Any:
    """A run directory's config.yaml from before each task had its options model: keep what its task reads."""
    if isinstance(section, dict) and set(section) == o.FLAT_KEYS and section.get("name") in _TASKS:
        return {k: v for k, v in section.items() if k in _TASKS[section["name"]].options.model_fields}
    return section


# The task section: one options model per task, chosen by ``name`` (synthetic when none is given), or an adapter.
# (Built from _TASKS, which a type checker cannot follow: it sees what every member is.)
if TYPE_CHECKING:
    TaskConfig = o.TaskOptions | AdapterTask
else:
    TaskConfig = Annotated[
        Union[tuple(Annotated[entry.options, Tag(name)] for name, entry in _TASKS.items())
              + (Annotated[AdapterTask, Tag(ADAPTER)],)],
        Discriminator(_tag),
        BeforeValidator(_flat_record),
    ]
_SECTION: TypeAdapter[o.TaskOptions | AdapterTask] = TypeAdapter(TaskConfig)


def options_model(name: str) -> type[o.TaskOptions]:
    return _TASKS[name].options


def task_options(**section: Any) -> o.TaskOptions | AdapterTask:
    """The task section ``section`` validated (pydantic's ``ValidationError`` when it is not valid)."""
    return _SECTION.validate_python(section)


def _loader(name: str) -> Callable[[Any], Task]:
    entry = _TASKS[name]
    loader: Callable[[Any], Task] = getattr(import_module(entry.module), entry.loader)
    return loader


def task_from_config(config: o.TaskOptions | AdapterTask) -> Task:
    if isinstance(config, AdapterTask):
        return adapter_task(config)
    return _loader(config.name)(config)


def load_task(name: str, **options: Any) -> Task:
    """The named task with ``options`` (its options model's fields; one given as None counts as not given);
    an unknown name lists the valid ones."""
    key = name.strip().lower()
    if key not in _TASKS:
        raise InputError(f"unknown task {name!r}; valid task names: {', '.join(TASK_NAMES)}")
    given = {k: v for k, v in options.items() if v is not None}
    try:
        config = options_model(key).model_validate({"name": key, **given})
    except ValidationError as exc:
        raise InputError(describe_errors(options_model(key), exc, f"task {key}")) from None
    return task_from_config(config)
from mstar_ray.exit_codes import InputError
