"""What a schema field is for, guessed from its name (or, failing that, its description), and how a
value is made to fit its declared type."""

from __future__ import annotations

import re
from typing import Any

from mstar_ray.program_schema import FieldSpec

_DATE_CUES = frozenset("date time when timestamp day datetime ts created occurred happened".split())
_YEAR_CUES = frozenset({"year"})
_SPEAKER_CUES = frozenset(
    "speaker person who author name user participant character sender owner people persons names".split()
)
_PLACE_CUES = frozenset("location place where city country venue town".split())
_LESSON_CUES = frozenset("lesson insight takeaway rule principle reflection advice learning tip moral".split())
_TOPIC_CUES = frozenset(
    "topic keyword keywords tag entity entities subject category theme key label kind type concept".split()
)
_TEXT_CUES = frozenset(
    "summary content text fact note memory event other description detail observation message "
    "utterance statement body info information raw sentence quote value data item record log "
    "context episode".split()
)
# list[str] fields with these cues hold whole sentences rather than keywords.
_SENTENCE_LIST_CUES = frozenset(
    "fact sentence statement event note memory lesson point detail claim observation highlight "
    "insight takeaway summary line content text".split()
)
_QUESTION_CUES = frozenset("question query text content q prompt message request search input ask utterance".split())
_QUERY_KEYWORD_CUES = frozenset("keyword keywords term entity entities topic tag key word concept subject".split())
_COUNT_CUES = frozenset("k top limit n max num count size number results".split())


def name_tokens(text: str) -> list[str]:
    """``"eventDate"``/``"event_date"`` -> ``["event", "date"]``, plus singular forms."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    words = [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]
    return words + [w[:-1] for w in words if len(w) > 3 and w.endswith("s")]


def field_role(spec: FieldSpec, order: tuple[tuple[str, frozenset[str]], ...], *, name_only: bool = False) -> str:
    """The first role (in priority order) whose cues occur in the name, else in the description."""
    for source in (spec.name,) if name_only else (spec.name, spec.description):
        tokens = set(name_tokens(source))
        for role, cues in order:
            if tokens & cues:
                return role
    return "unknown"


_SUMMARY_CUES = frozenset("summary gist overview abstract synopsis digest recap".split())
_FACTS_CUES = frozenset("fact facts".split())
_PHRASE_CUES = frozenset("quote quotes phrase phrases span spans verbatim excerpt excerpts snippet snippets".split())
ITEM_STR_ROLES = (
    ("date", _DATE_CUES),
    ("year", _YEAR_CUES),
    ("speaker", _SPEAKER_CUES),
    ("place", _PLACE_CUES),
    ("lesson", _LESSON_CUES),
    ("summary", _SUMMARY_CUES),
    ("facts", _FACTS_CUES),
    ("topic", _TOPIC_CUES),
    ("text", _TEXT_CUES),
)
ITEM_LIST_ROLES = (
    ("date", _DATE_CUES),
    ("speaker", _SPEAKER_CUES),
    ("phrases", _PHRASE_CUES),
    ("sentences", _SENTENCE_LIST_CUES),
    ("topic", _TOPIC_CUES),
)
# "target" is not among them: it says a field is what the query aims at, not what kind of thing that is
# ("target_person" is a person, "target_relation" a relation, "target_topic" a topic).
_SUBJECT_CUES = frozenset("subject person who speaker participant character entity entities name people".split())
_ANSWER_TYPE_CUES = frozenset("type kind attribute detail requested expected".split())
_CONDITION_CUES = frozenset("condition hypothetical counterfactual assumption premise".split())
_RELATION_CUES = frozenset("relation intent focus hint scope qualifier filter aspect event predicate action".split())
_LIST_CUES = frozenset("list plural multiple many aggregation".split())
_NUMERIC_CUES = frozenset("numeric number count quantity".split())
QUERY_ROLES = (
    ("date", _DATE_CUES),
    ("keywords", frozenset("keyword keywords term terms tag concept word words".split())),
    ("condition", _CONDITION_CUES),
    ("subject", _SUBJECT_CUES),
    ("place", _PLACE_CUES),
    ("answer_type", _ANSWER_TYPE_CUES),
    ("relation", _RELATION_CUES),
    ("keywords", frozenset("topic key subject".split())),
    ("question", _QUESTION_CUES),
)
# Booleans of a Query: does the question ask for a list, for a number?
QUERY_FLAG_ROLES = (("list", _LIST_CUES), ("numeric", _NUMERIC_CUES))
QUERY_COUNT_ROLES = (("count", _COUNT_CUES),)


def dict_value_type(type_str: str) -> str | None:
    m = re.fullmatch(r"dict\[\s*str\s*,\s*(.+)\]", type_str.strip())
    return m.group(1).strip() if m else None


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def finish(spec: FieldSpec, value: Any) -> Any:
    """Optional fields say "nothing found" with None rather than an empty value."""
    if spec.optional and _empty(value):
        return None
    return value
