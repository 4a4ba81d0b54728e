"""Reading a model's JSON reply against a program's schema, field by field.

Small and busy models wrap JSON in prose or code fences, miss fields and give numbers as strings.
``conform`` keeps what is usable, converts what is unambiguous (``"3"`` for an int, a scalar for a
string), and lists every remaining problem so that one corrective retry can show the model its errors.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mstar_ray.program_schema import FieldSpec

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json_object(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The first JSON object in ``text``, or None and why not."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = json.JSONDecoder().raw_decode(candidate[start:])
            except json.JSONDecodeError:
                start = candidate.find("{", start + 1)
                continue
            if isinstance(value, dict):
                return value, None
            start = candidate.find("{", start + 1)
    return None, "the reply holds no JSON object"


def _conform_value(type_: str, value: Any, where: str, errors: list[str]) -> Any:
    optional = type_.startswith("Optional[")
    if optional:
        if value is None:
            return None
        type_ = type_[len("Optional[") : -1]
    if type_ == "str":
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float, bool)):
            return str(value)
    elif type_ == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
    elif type_ == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif type_ == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif type_.startswith("list["):
        inner = type_[len("list[") : -1]
        if isinstance(value, list):
            return [_conform_value(inner, v, f"{where}[{i}]", errors) for i, v in enumerate(value)]
        if inner == "str" and isinstance(value, str):
            return [value]
    elif type_.startswith("dict[str, "):
        inner = type_[len("dict[str, ") : -1]
        if isinstance(value, dict):
            return {str(k): _conform_value(inner, v, f"{where}.{k}", errors) for k, v in value.items()}
    elif type_ == "any":
        return value
    errors.append(f"{where}: expected {type_}, got {json.dumps(value)[:80]}")
    return value


def conform(obj: dict[str, Any], fields: list[FieldSpec]) -> tuple[dict[str, Any], list[str]]:
    """(the object reduced to the schema's fields, problems found)."""
    errors: list[str] = []
    out: dict[str, Any] = {}
    for spec in fields:
        if spec.name not in obj or (obj[spec.name] is None and not spec.optional):
            if spec.optional and not spec.has_default:
                out[spec.name] = None
            elif not spec.has_default:
                errors.append(f"{spec.name}: missing (expected {spec.type})")
            continue
        type_ = f"Optional[{spec.type}]" if spec.optional else spec.type
        out[spec.name] = _conform_value(type_, obj[spec.name], spec.name, errors)
    return out, errors


def fallback(fields: list[FieldSpec], text: str) -> dict[str, Any]:
    """A schema-valid object when the model could not produce one: the text in string fields, empty rest."""
    empty = {"str": text, "int": 0, "float": 0.0, "bool": False, "any": text}
    out: dict[str, Any] = {}
    for spec in fields:
        if spec.has_default:
            continue
        if spec.optional:
            out[spec.name] = None
        elif spec.base in ("list", "dict"):
            out[spec.name] = [] if spec.base == "list" else {}
        else:
            out[spec.name] = empty.get(spec.type, text)
    return out
