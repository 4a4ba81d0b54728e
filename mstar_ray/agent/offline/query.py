"""Query building: a question poured into the program's ``Query`` fields by their roles, as a model fills them:
the person asked about, the kind of answer wanted, the condition of a hypothetical, the relation asked, whether a
list or a number is wanted; an optional field the question says nothing about stays None."""

from __future__ import annotations

import re
from typing import Any

from mstar_ray import text as tx
from mstar_ray.families.qa.offline import question_type
from mstar_ray.agent.offline.fields import QUERY_COUNT_ROLES, QUERY_FLAG_ROLES, QUERY_ROLES, finish, field_role
from mstar_ray.program_schema import FieldSpec

# What a model calls the answer a question of each type wants.
_ANSWER_TYPES = {"when": "date", "year": "year", "month": "month", "number": "number", "duration": "duration",
                 "who": "person", "where": "place", "name": "name"}
_CONDITION = re.compile(r"\b(?:if|without|unless|had (?:she|he|they|it|I|we) not)\b[^?]*", re.IGNORECASE)
_PLURAL_ASK = re.compile(r"\b(?:what|which)\s+(?:kinds? of\s+|types? of\s+)?(\w+)|\b(list|all|some)\b", re.IGNORECASE)
_NUMERIC_ASK = re.compile(r"\bhow (?:many|much|old|long|often)\b", re.IGNORECASE)
_NOT_PLURAL = frozenset("is was does has this his its".split())


class _Asked:
    """Everything query building may need from one question, computed once. ``names_elsewhere``: whether the
    Query has a field for the person asked about; without one a model keeps the names in the relation asked
    ("the type of pet Noodle is"), since nothing else would carry them."""

    def __init__(self, question: str, names_elsewhere: bool = True) -> None:
        self.question = question
        self.qtype = question_type(question)
        self.names = [n.text for n in tx.find_names(question) if n.text.lower() not in tx.QUESTION_WORDS]
        self.dates = [d.text for d in tx.find_dates(question)]
        self.words = tx.content_words(question)
        name_words = {w.lower() for n in self.names for w in n.split()}
        self.predicate = [w for w in self.words if w.lower().rstrip("'s") not in name_words]
        self.relation = self.predicate if names_elsewhere else self.words
        condition = _CONDITION.search(question)
        self.condition = condition.group(0).strip() if condition else ""

    @property
    def answer_type(self) -> str:
        return _ANSWER_TYPES.get(self.qtype) or (self.predicate[0] if self.predicate else "")

    @property
    def wants_list(self) -> bool:
        for m in _PLURAL_ASK.finditer(self.question):
            word = (m.group(1) or "").lower()
            if m.group(2) or word in ("are", "were") or (word.endswith("s") and word not in _NOT_PLURAL):
                return True
        return False

    @property
    def wants_number(self) -> bool:
        return bool(_NUMERIC_ASK.search(self.question))


def _str_value(role: str, asked: _Asked) -> str:
    if role == "date":
        return asked.dates[0] if asked.dates else ""
    if role == "subject":
        return asked.names[0] if asked.names else ""
    if role == "place":
        places = tx.find_places(asked.question)
        return places[0] if places else ""
    if role == "keywords":
        return " ".join(asked.words)
    if role == "answer_type":
        return asked.answer_type
    if role == "condition":
        return asked.condition
    if role == "relation":
        return " ".join(asked.relation)
    return asked.question


def _query_value(spec: FieldSpec, asked: _Asked) -> Any:
    base = spec.base
    if base == "str":
        return _str_value(field_role(spec, QUERY_ROLES), asked)
    if base == "int":
        return 5 if field_role(spec, QUERY_COUNT_ROLES) == "count" else 0
    if base == "float":
        return 0.0
    if base == "bool":
        flag = field_role(spec, QUERY_FLAG_ROLES)
        return asked.wants_list if flag == "list" else asked.wants_number if flag == "numeric" else False
    if base == "list":
        if spec.item_type != "str":
            return []
        role = field_role(spec, QUERY_ROLES)
        if role == "date":
            return asked.dates
        if role == "subject":
            return asked.names
        if role == "question":
            return [asked.question]
        if role in ("relation", "answer_type", "condition"):
            value = _str_value(role, asked)
            return [value] if value else []
        return asked.words
    if base == "dict":
        return {}
    return asked.question


def build_query(fields: list[FieldSpec], question: str) -> dict[str, Any]:
    """Fill every field of a Query from one question."""
    names_elsewhere = any(field_role(spec, QUERY_ROLES) == "subject" for spec in fields)
    asked = _Asked(question.strip(), names_elsewhere)
    return {spec.name: finish(spec, _query_value(spec, asked)) for spec in fields}
