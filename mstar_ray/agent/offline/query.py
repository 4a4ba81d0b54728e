"""Query building: a question poured into the program's ``Query`` fields by their roles."""

from __future__ import annotations

from typing import Any

from mstar_ray import text as tx
from mstar_ray.agent.offline.fields import QUERY_ROLES, finish, field_role
from mstar_ray.program_schema import FieldSpec

def _query_value(spec: FieldSpec, question: str) -> Any:
    role = field_role(spec, QUERY_ROLES)
    base = spec.base
    words = tx.content_words(question)
    names = [n.text for n in tx.find_names(question)]
    dates = [d.text for d in tx.find_dates(question)]
    if base == "str":
        if role == "date":
            return dates[0] if dates else ""
        if role == "speaker":
            return names[0] if names else ""
        if role == "place":
            places = tx.find_places(question)
            return places[0] if places else ""
        if role == "keywords":
            return " ".join(words)
        return question
    if base == "int":
        return 5 if role == "count" else 0
    if base == "float":
        return 0.0
    if base == "bool":
        return False
    if base == "list":
        if spec.item_type != "str":
            return []
        if role == "date":
            return dates
        if role == "speaker":
            return names
        if role == "question":
            return [question]
        return words
    if base == "dict":
        return {}
    return question


def build_query(fields: list[FieldSpec], question: str) -> dict[str, Any]:
    """Fill every field of a Query from one question."""
    q = question.strip()
    return {spec.name: finish(spec, _query_value(spec, q)) for spec in fields}
