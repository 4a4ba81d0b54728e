"""Reading the records of files a user supplies: every error names the file, the record and the field at fault,
and a file is read whole before anything of it is used, so a bad record never leaves a task half-loaded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from mstar_ray.exit_codes import InputError

Model = TypeVar("Model", bound=BaseModel)


def parse_record(model: type[Model], raw: Any, where: str) -> Model:
    """``raw`` as ``model``, or a ``ValueError`` naming the place and the first field at fault."""
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "<record>"
        more = err.error_count() - 1
        raise InputError(f"{where}: field {field!r}: {first['msg']}" + (f" (and {more} more problems)" if more else "")) from None


def read_json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number from 1, JSON object) for every non-blank line of a JSON Lines file."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise InputError(f"{path} is not UTF-8 text: {err}") from err
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            # json's messages end in " at" when the position is meant to follow ("Unterminated string starting at")
            at = f"{err.msg} column {err.colno}" if err.msg.endswith(" at") else f"{err.msg} at column {err.colno}"
            raise InputError(f"{path}: line {number}: not valid JSON ({at})") from None
        if not isinstance(value, dict):
            raise InputError(f"{path}: line {number}: expected a JSON object, found {type(value).__name__}")
        yield number, value
