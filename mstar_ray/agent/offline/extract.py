"""Knowledge-item extraction: a raw text's facts (speaker, date, sentences...) poured into the program's
``KnowledgeItem`` fields by their roles."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from mstar_ray import text as tx
from mstar_ray.agent.offline.fields import ITEM_LIST_ROLES, ITEM_STR_ROLES, dict_value_type, finish, field_role
from mstar_ray.agent.offline.kinds import statement_marker
from mstar_ray.statements import Statement, informative, is_fact, statements
from mstar_ray.program_schema import FieldSpec

# How much a model keeps of a text when asked for its summary, its facts, its key phrases.
SUMMARY_SENTENCES = 6
MAX_FACTS = 20
MAX_PHRASES = 12
_CLAUSE_BREAK = re.compile(r"\s*(?:[,;:\u2014\u2013]|\s-\s|\band\b|\bbut\b|\bso\b)\s*")

@dataclass(frozen=True)
class _Facts:
    """Everything extraction may need from one raw text, computed once."""

    raw: str
    turn: tx.SpeakerTurn
    dates: list[str]
    names: list[str]
    keywords: list[str]

    @cached_property
    def statements(self) -> list[Statement]:
        return statements(self.raw)

    @cached_property
    def facts(self) -> list[Statement]:
        """The fact sentences a model would list, rendered with speaker and resolved dates, most informative
        kept when there are more than it would list."""
        return informative(self.statements, MAX_FACTS) if len(self.statements) > MAX_FACTS else \
            [s for s in self.statements if is_fact(s)]

    def summary(self) -> str:
        """An extractive summary: the most informative sentences, each as "[date] Speaker: sentence" with relative
        dates resolved, one a line (the layout of a dated transcript, which every reader here parses)."""
        return "\n".join(s.render(with_date=True) for s in informative(self.statements, SUMMARY_SENTENCES)) or self.body

    def phrases(self) -> list[str]:
        """Short verbatim clauses of the facts (2 to 10 words): what "salient quotes" or "key phrases" hold."""
        out: list[str] = []
        for s in self.facts:
            for clause in _CLAUSE_BREAK.split(s.resolved):
                words = clause.strip(" .!?\"'").split()
                if 2 <= len(words) <= 10 and len(tx.content_words(clause)) >= 2 and clause not in out:
                    out.append(" ".join(words))
        return out[:MAX_PHRASES]

    @property
    def body(self) -> str:
        return self.turn.body or self.raw

    @property
    def date(self) -> str:
        if self.turn.date is not None:
            return self.turn.date.text
        return self.dates[0] if self.dates else ""


def _facts(raw_text: str) -> _Facts:
    raw = raw_text.strip()
    turn = tx.parse_turn(raw)
    names: list[str] = [turn.speaker] if turn.speaker else []
    for mention in tx.find_names(turn.body):
        if mention.text not in names and not mention.sentence_initial:
            names.append(mention.text)
    return _Facts(
        raw=raw,
        turn=turn,
        dates=[d.text for d in tx.find_dates(raw)],
        names=names,
        keywords=tx.keywords(turn.body or raw),
    )


def _meta(f: _Facts) -> dict[str, str]:
    meta: dict[str, str] = {}
    if f.turn.speaker:
        meta["speaker"] = f.turn.speaker
    if f.date:
        meta["date"] = f.date
    return meta


def _holds_context(fields: list[FieldSpec]) -> bool:
    """Whether the schema has somewhere other than its text fields to keep speaker and date.

    If it does not, text fields keep the raw header, so "when"/"who" evidence is never dropped.
    """
    str_roles = {field_role(s, ITEM_STR_ROLES) for s in fields if s.base == "str"}
    has_meta_dict = any(dict_value_type(s.type) in ("str", "any") for s in fields)
    return has_meta_dict or {"speaker", "date"} <= str_roles


def _short_sentence(f: _Facts, with_header: bool) -> str:
    sentences = tx.split_sentences(f.body)
    first = sentences[0] if sentences else f.body
    words = first.split()
    if len(words) > 25:
        first = " ".join(words[:25])
    who = f.turn.speaker or "Someone"
    lead = f"[{f.turn.header}] " if with_header and f.turn.header else ""
    return f"{lead}{who}: {first}" if f.turn.speaker or lead else first


def _str_value(spec: FieldSpec, f: _Facts, keep_header: bool) -> str:
    role = field_role(spec, ITEM_STR_ROLES)
    if role == "date":
        return f.date
    if role == "year":
        year = next((d for d in (tx.find_dates(f.date) if f.date else []) if d.year), None)
        return str(year.year) if year else ""
    if role == "speaker":
        return f.names[0] if f.names else ""
    if role == "place":
        places = tx.find_places(f.body)
        return places[0] if places else ""
    if role == "lesson":
        return _short_sentence(f, keep_header)
    if role == "topic":
        return ", ".join(f.keywords[:3])
    if role == "summary":
        return f.summary()
    if role == "facts":
        return " ".join(s.render() for s in f.facts) or f.body
    marker = statement_marker(spec) if role == "unknown" else None
    if marker is not None:
        return next((s.render() for s in f.facts if marker.search(s.sentence)), "")
    return f.raw if keep_header else f.body


def _list_value(spec: FieldSpec, f: _Facts) -> list[Any]:
    item = spec.item_type or "any"
    if item in ("int", "float"):
        numbers = [tx.first_number(n) for n in tx.find_numbers(f.body)]
        cast = int if item == "int" else float
        return [cast(n) for n in numbers if n is not None]
    if item != "str":
        return []
    role = field_role(spec, ITEM_LIST_ROLES)
    # What the name asks for outranks a word of the description: "activities_done", described as done "by
    # participants", holds the activities, not the participants' names.
    if field_role(spec, ITEM_LIST_ROLES, name_only=True) == "unknown" and statement_marker(spec, name_only=True):
        role = "unknown"
    if role == "date":
        return list(f.dates)
    if role == "speaker":
        return list(f.names)
    marker = statement_marker(spec)
    if marker is not None:
        return [s.render() for s in f.facts if marker.search(s.sentence)]
    if role == "phrases":
        return f.phrases()
    if role == "sentences":
        return [s.render() for s in f.facts]
    return list(f.keywords)


def _item_value(spec: FieldSpec, f: _Facts, keep_header: bool) -> Any:
    base = spec.base
    if base == "str":
        return _str_value(spec, f, keep_header)
    if base in ("int", "float"):
        if field_role(spec, ITEM_STR_ROLES) == "year":
            year = next((d.year for d in tx.find_dates(f.raw) if d.year), None)
            number = float(year) if year else None
        else:
            number = tx.first_number(f.body)
        if number is None:
            return None if spec.optional else (0 if base == "int" else 0.0)
        return int(number) if base == "int" else float(number)
    if base == "bool":
        return False
    if base == "list":
        return _list_value(spec, f)
    if base == "dict":
        return dict(_meta(f)) if dict_value_type(spec.type) in ("str", "any") else {}
    # ``any`` and anything the type language does not name: the text itself is always valid JSON.
    return f.raw


def extract_item(fields: list[FieldSpec], raw_text: str) -> dict[str, Any]:
    """Fill every field of a KnowledgeItem from one raw text, each with a value of its JSON type."""
    f = _facts(raw_text)
    keep_header = not _holds_context(fields)
    return {spec.name: finish(spec, _item_value(spec, f, keep_header)) for spec in fields}
