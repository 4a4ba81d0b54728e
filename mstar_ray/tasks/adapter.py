"""A user's own task from outside the package: a run config's ``task: {adapter: my_tasks.py:MyTask, ...}``.

The adapter (a class, made with no arguments, or any object) provides::

    family                # a package family's name (mstar_ray.families.FAMILY_NAMES) or a Family class of its own
    texts(options)        # the raw texts to write: RawText, or dicts of its fields
    items(options)        # the items to run: Item, or dicts of its fields
    name                  # optional: the task's name in reports (default: the adapter's own name)
    Options               # optional: a pydantic model of its options, the task section's other keys

``adapter`` is ``FILE.py:NAME`` (a relative file is looked up from the config file's folder, then the working
directory) or ``MODULE:NAME`` for an importable module. Texts and items are loaded where the run starts and
travel in the jobs, as every task's do. A family of the user's own runs on every worker: it is shipped as a
:class:`FamilyRef` inside each evaluation job, by value (the file's source, executed there under the same
module name) for a file, by name for a module, which must then be installed on the workers.
"""

from __future__ import annotations

import hashlib
import re
import sys
import types
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mstar_ray.exit_codes import InputError
from mstar_ray.config_file import describe_errors
from mstar_ray.tasks.model import Item, RawText, Task

# What a Family must have (mstar_ray.families.base.Family; tests/test_task_adapter.py keeps the two equal):
# checked on the user's class here, where the task is loaded, so that a missing member is an input error
# naming the file before anything starts.
FAMILY_MEMBERS: tuple[str, ...] = ("brief", "metric_for", "name", "overlap", "run", "steps")


class AdapterError(InputError):
    """A task adapter that cannot be used: the message names the file and what is missing or wrong."""


class AdapterTask(BaseModel):
    """The ``task`` section naming an adapter; every other key is one of the adapter's options."""

    model_config = ConfigDict(frozen=True, extra="allow")

    adapter: str = Field(description="FILE.py:NAME or MODULE:NAME: the class (or object) that provides the task")

    @property
    def name(self) -> str:
        return self.adapter

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class FamilyRef(BaseModel):
    """Where a family of the user's own is defined, so that a worker can make it: ``source`` is the file's
    text for a file (executed there as module ``module``), None for a module the workers import by name."""

    model_config = ConfigDict(frozen=True)

    name: str  # the family's name, as Task.family names it
    module: str
    qualname: str
    origin: str  # the file or module it came from, for messages
    source: str | None = None


_REFS: dict[str, FamilyRef] = {}  # this process's families of users' own, by name


def register(ref: FamilyRef) -> None:
    """Make ``ref`` known in this process (the driver, when the task is loaded; a worker, from its job)."""
    known = _REFS.get(ref.name)
    if known is not None and known != ref:
        raise AdapterError(f"two different families are called {ref.name!r}: from {known.origin} and {ref.origin}")
    _REFS[ref.name] = ref


def registered(name: str) -> FamilyRef | None:
    return _REFS.get(name)


def family_class(ref: FamilyRef) -> type:
    """The class ``ref`` names, its module imported (or, for a file, executed from the shipped source) once."""
    module = _module_from_source(ref.module, ref.source, ref.origin) if ref.source is not None else import_module(ref.module)
    found: object = module
    for part in ref.qualname.split("."):
        found = getattr(found, part)
    if not isinstance(found, type):
        raise AdapterError(f"{ref.origin}: {ref.qualname} is not a class")
    return found


def _module_from_source(name: str, source: str, origin: str) -> types.ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    module = types.ModuleType(name)
    module.__file__ = origin
    sys.modules[name] = module  # before running it: pydantic models and dataclasses look their module up
    try:
        exec(compile(source, origin, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _file_module_name(path: Path, source: str) -> str:
    """One name per file content, the same on every machine: ``mstar_user_my_tasks_3f2a...``."""
    stem = re.sub(r"\W", "_", path.stem)
    return f"mstar_user_{stem}_{hashlib.sha256(source.encode()).hexdigest()[:12]}"


def resolve_file(spec: str, config_dir: Path | None) -> str:
    """``spec`` with a relative file made absolute (from ``config_dir``, then the working directory); a module
    reference is returned as it is. Raises ``AdapterError`` for a malformed spec or a missing file."""
    target, colon, attribute = spec.rpartition(":")
    if not colon or not target or not attribute.isidentifier():
        raise AdapterError(f"task.adapter: {spec!r} must be FILE.py:NAME or MODULE:NAME (NAME: the adapter class)")
    if not target.endswith(".py"):
        return spec
    path = Path(target).expanduser()
    candidates = [path] if path.is_absolute() else [*([config_dir / path] if config_dir else []), Path.cwd() / path]
    for candidate in candidates:
        if candidate.is_file():
            return f"{candidate.resolve()}:{attribute}"
    raise AdapterError(f"task.adapter: file not found: {target} (looked in {', '.join(str(c.parent) for c in candidates)})")


@dataclass(frozen=True)
class Adapter:
    """A loaded adapter: its object, where it came from, and its module (to find a family defined there)."""

    obj: Any
    origin: str  # FILE.py:NAME or MODULE:NAME, for messages
    module: types.ModuleType
    source: str | None  # the file's text; None for a module imported by name

    @classmethod
    def load(cls, spec: str) -> Adapter:
        target, _, attribute = resolve_file(spec, None).rpartition(":")
        source = None
        try:
            if target.endswith(".py"):
                source = Path(target).read_text(encoding="utf-8")
                module = _module_from_source(_file_module_name(Path(target), source), source, target)
            else:
                module = import_module(target)
        except Exception as exc:
            raise AdapterError(f"task.adapter: importing {target} failed: {type(exc).__name__}: {exc}") from exc
        if not hasattr(module, attribute):
            public = sorted(n for n in vars(module) if not n.startswith("_"))
            raise AdapterError(f"task.adapter: {target} has no {attribute!r} (it defines {', '.join(public) or 'nothing'})")
        found = getattr(module, attribute)
        origin = f"{target}:{attribute}"
        try:
            obj = found() if isinstance(found, type) else found
        except Exception as exc:
            raise AdapterError(f"task.adapter: {origin}() failed (an adapter class is made with no arguments): "
                               f"{type(exc).__name__}: {exc}") from exc
        missing = [m for m in ("family", "texts", "items") if not hasattr(obj, m)]
        missing += [m for m in ("texts", "items") if hasattr(obj, m) and not callable(getattr(obj, m))]
        if missing:
            raise AdapterError(f"task.adapter: {origin} lacks {', '.join(dict.fromkeys(missing))}: an adapter has "
                               "family (a family's name or a Family class), texts(options) and items(options)")
        return cls(obj, origin, module, source)

    def options(self, given: dict[str, Any]) -> BaseModel | None:
        model = getattr(self.obj, "Options", None)
        if model is None:
            if given:
                raise AdapterError(f"task.{sorted(given)[0]}: unknown key; {self.origin} takes no options "
                                   "(it defines no Options model)")
            return None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise AdapterError(f"task.adapter: {self.origin}.Options must be a pydantic model class")
        try:
            return model.model_validate(given)
        except ValidationError as exc:
            raise AdapterError(describe_errors(model, exc, f"{self.origin}'s options", prefix="task.")) from None

    def family(self) -> tuple[str, FamilyRef | None]:
        """The family's name, and where it is defined when it is the user's own."""
        family = self.obj.family
        if isinstance(family, str):
            return family, None
        cls = family if isinstance(family, type) else type(family)
        missing = [m for m in FAMILY_MEMBERS if not hasattr(cls, m)]
        if missing:
            raise AdapterError(f"task.adapter: {self.origin}'s family {cls.__qualname__} is not a Family: it lacks "
                               f"{', '.join(missing)} (mstar_ray.families.base.Family)")
        name = getattr(cls, "name")
        if not isinstance(name, str) or not name:
            raise AdapterError(f"task.adapter: {self.origin}'s family {cls.__qualname__}.name must be a non-empty string")
        if "<locals>" in cls.__qualname__:
            raise AdapterError(f"task.adapter: {self.origin}'s family {cls.__qualname__} must be defined at the top "
                               "level of its module, so that a worker can find it")
        if cls.__module__ == self.module.__name__:  # defined in the adapter's own file or module
            return name, FamilyRef(name=name, module=cls.__module__, qualname=cls.__qualname__, origin=self.origin,
                                   source=self.source)
        return name, FamilyRef(name=name, module=cls.__module__, qualname=cls.__qualname__,
                               origin=f"{cls.__module__}.{cls.__qualname__}")

    def records(self, what: str, options: BaseModel | None, model: type[BaseModel]) -> list[Any]:
        try:
            given = list(getattr(self.obj, what)(options))
        except Exception as exc:
            raise AdapterError(f"{self.origin}.{what}(options) failed: {type(exc).__name__}: {exc}") from exc
        out = []
        for index, record in enumerate(given):
            try:
                out.append(record if isinstance(record, model) else model.model_validate(record))
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(record)'}: {e['msg']}" for e in exc.errors())
                raise AdapterError(f"{self.origin}.{what}(options)[{index}] is not a valid {model.__name__}: {problems}") from None
        return out


def adapter_task(config: AdapterTask) -> Task:
    """Load the adapter ``config`` names and the task it provides; a family of its own is registered here."""
    adapter = Adapter.load(config.adapter)
    options = adapter.options(config.options)
    family, ref = adapter.family()
    texts = adapter.records("texts", options, RawText)
    items = adapter.records("items", options, Item)
    if not items:
        raise AdapterError(f"{adapter.origin}.items(options) returned no items")
    name = getattr(adapter.obj, "name", None) or adapter.origin.rpartition(":")[2]
    try:
        task = Task(name=str(name), family=family, texts=texts, items=items)
    except ValidationError as exc:
        raise AdapterError(f"{adapter.origin}: {exc.errors()[0]['msg']}") from None
    if ref is not None:
        register(ref)
    return task
