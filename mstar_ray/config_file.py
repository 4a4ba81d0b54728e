"""Reading a YAML file into a pydantic model with errors a user can act on: each names the key path
(``llm.task.timeout_s``), and an unknown key comes with the nearest valid one."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from mstar_ray.exit_codes import InputError

Model = TypeVar("Model", bound=BaseModel)


class ConfigError(InputError):
    """A config file that cannot be used; the message lists every problem with its key path."""


def _model_at(model: type[BaseModel], path: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that holds the key at ``path`` (to list the keys that would have been valid)."""
    current: Any = model
    for part in path[:-1]:
        if isinstance(part, int) or not (isinstance(current, type) and issubclass(current, BaseModel)):
            continue
        field = current.model_fields.get(part)
        if field is None:
            return None
        current = _first_model(field.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _first_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def describe_errors(model: type[BaseModel], error: ValidationError, source: str) -> str:
    lines = []
    for item in error.errors():
        path = tuple(p for p in item["loc"] if not (isinstance(p, str) and p.startswith(("function-", "tagged-union"))))
        where = ".".join(str(p) for p in path) or "(top level)"
        if item["type"] == "extra_forbidden":
            owner = _model_at(model, path)
            valid = sorted(owner.model_fields) if owner else []
            near = difflib.get_close_matches(str(path[-1]), valid, n=1, cutoff=0.5)
            hint = f"; did you mean {near[0]!r}?" if near else (f"; valid keys: {', '.join(valid)}" if valid else "")
            lines.append(f"  {where}: unknown key{hint}")
        else:
            lines.append(f"  {where}: {item['msg']}")
    return f"{source}: invalid config\n" + "\n".join(lines)


def load_model(model: type[Model], data: Any, source: str) -> Model:
    try:
        return model.model_validate(data if data is not None else {})
    except ValidationError as exc:
        raise ConfigError(describe_errors(model, exc, source)) from None


def load_yaml(model: type[Model], path: str | Path) -> Model:
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, not {type(data).__name__}")
    return load_model(model, data, str(path))
