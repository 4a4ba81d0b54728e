"""Reading a YAML file into a pydantic model with errors a user can act on: each names the key path
(``llm.task.timeout_s``), and an unknown key comes with the nearest valid one."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, Tag, ValidationError

from mstar_ray.exit_codes import InputError

Model = TypeVar("Model", bound=BaseModel)


class ConfigError(InputError):
    """A config file that cannot be used; the message lists every problem with its key path."""


def _tagged(annotation: Any, tag: Any) -> Any:
    """The member of a tagged union (``Annotated[Model, Tag(tag)]``) that ``tag`` names, else None."""
    for arg in getattr(annotation, "__args__", ()) or ():
        if any(isinstance(m, Tag) and m.tag == tag for m in getattr(arg, "__metadata__", ())):
            return arg.__origin__
        found = _tagged(arg, tag)
        if found is not None:
            return found
    return None


def _walk(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[tuple[Any, ...], type[BaseModel] | None]:
    """The key path as the user wrote it (pydantic's union tags left out) and the model holding its last key,
    to list the keys that would have been valid there."""
    path: list[Any] = []
    current: Any = model
    owner: Any = None
    annotation: Any = None
    for part in loc:
        if isinstance(part, str) and part.startswith(("function-", "tagged-union")):
            continue
        member = _tagged(annotation, part)
        if member is not None:  # the tag of the union member the value was checked against
            current, annotation = member, None
            continue
        path.append(part)
        if isinstance(part, int):
            continue
        owner = current if isinstance(current, type) and issubclass(current, BaseModel) else None
        field = owner.model_fields.get(part) if owner is not None else None
        annotation = field.annotation if field is not None else None
        current = _first_model(annotation)
    return tuple(path), owner


def _first_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def _described(owner: type[BaseModel] | None, path: tuple[Any, ...]) -> str:
    """What the key is for, as the configuration reference says it (the field's description), if it has one."""
    field = owner.model_fields.get(path[-1]) if owner is not None and path and isinstance(path[-1], str) else None
    return f" (the key: {field.description})" if field is not None and field.description else ""


def key_lines(text: str) -> dict[tuple[Any, ...], int]:
    """The line (from 1) of every key path of a YAML document, as it was written (list items by index)."""
    found: dict[tuple[Any, ...], int] = {}

    def walk(node: yaml.Node, path: tuple[Any, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    found[path + (key.value,)] = key.start_mark.line + 1
                    walk(value, path + (key.value,))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                found[path + (index,)] = item.start_mark.line + 1
                walk(item, path + (index,))

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return found
    if root is not None:
        walk(root, ())
    return found


def describe_errors(model: type[BaseModel], error: ValidationError, source: str, prefix: str = "",
                    lines_of: dict[tuple[Any, ...], int] | None = None) -> str:
    """Every problem of ``error`` on its own line, with its key path (after ``prefix``) and, given the file's
    ``key_lines``, the line the key is on (or its nearest enclosing key's, for a key that is missing)."""
    lines = []
    for item in error.errors():
        path, owner = _walk(model, tuple(item["loc"]))
        where = prefix + ".".join(str(p) for p in path) if path else prefix.rstrip(".") or "(top level)"
        if lines_of:
            line = next((lines_of[path[:n]] for n in range(len(path), 0, -1) if path[:n] in lines_of), None)
            where = f"line {line}: {where}" if line is not None else where
        if item["type"] == "extra_forbidden":
            valid = sorted(owner.model_fields) if owner else []
            near = difflib.get_close_matches(str(path[-1]), valid, n=1, cutoff=0.5)
            hint = f"; did you mean {near[0]!r}?" if near else (f"; valid keys: {', '.join(valid)}" if valid else "")
            lines.append(f"  {where}: unknown key{hint}")
        elif item["type"] == "union_tag_invalid":
            lines.append(f"  {where}: unknown {item['ctx']['tag']!r}; valid: {item['ctx']['expected_tags']}")
        else:
            lines.append(f"  {where}: {item['msg']}{_described(owner, path)}")
    return f"{source}: invalid config\n" + "\n".join(lines)


def load_model(model: type[Model], data: Any, source: str, text: str | None = None) -> Model:
    """``data`` as ``model``; ``text``, the file it was read from, lets an error name each key's line."""
    try:
        return model.model_validate(data if data is not None else {})
    except ValidationError as exc:
        raise ConfigError(describe_errors(model, exc, source, lines_of=key_lines(text) if text else None)) from None


def load_yaml(model: type[Model], path: str | Path) -> Model:
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file not found: {path}")
    text = file.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, not {type(data).__name__}")
    return load_model(model, data, str(path), text)
