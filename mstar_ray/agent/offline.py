"""The offline task agent: a deterministic, rule-based stand-in for an LLM, with no network and no key.

``OfflineBackend`` (``name = "offline"``) implements the four protocol steps with string rules only:
schema fields are filled from cues in their names and types, questions are answered by picking the
context sentence that best matches the question and cutting a short span out of it. It is not a
language model and does not try to look like one; it exists so the whole search can run, be tested
and be reproduced byte for byte without an API. Its answers still depend on what the memory returns,
so a memory program that retrieves the evidence scores clearly better than one that does not.

Nothing here uses randomness, ``hash()`` or set iteration order, so outputs are identical across
processes regardless of ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mstar_ray import text as tx
from mstar_ray.llm.usage import StepUsage
from mstar_ray.program_schema import FieldSpec

IDK = "I don't know"

# --------------------------------------------------------------------------------------------------
# Field roles, guessed from a field's name (or, failing that, its description)
# --------------------------------------------------------------------------------------------------

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


def _name_tokens(text: str) -> list[str]:
    """``"eventDate"``/``"event_date"`` -> ``["event", "date"]``, plus singular forms."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    words = [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]
    return words + [w[:-1] for w in words if len(w) > 3 and w.endswith("s")]


def _role(spec: FieldSpec, order: tuple[tuple[str, frozenset[str]], ...]) -> str:
    """The first role (in priority order) whose cues occur in the name, else in the description."""
    for source in (spec.name, spec.description):
        tokens = set(_name_tokens(source))
        for role, cues in order:
            if tokens & cues:
                return role
    return "unknown"


_ITEM_STR_ROLES = (
    ("date", _DATE_CUES),
    ("year", _YEAR_CUES),
    ("speaker", _SPEAKER_CUES),
    ("place", _PLACE_CUES),
    ("lesson", _LESSON_CUES),
    ("topic", _TOPIC_CUES),
    ("text", _TEXT_CUES),
)
_ITEM_LIST_ROLES = (
    ("date", _DATE_CUES),
    ("speaker", _SPEAKER_CUES),
    ("sentences", _SENTENCE_LIST_CUES),
    ("topic", _TOPIC_CUES),
)
_QUERY_ROLES = (
    ("date", _DATE_CUES),
    ("speaker", _SPEAKER_CUES),
    ("place", _PLACE_CUES),
    ("keywords", _QUERY_KEYWORD_CUES),
    ("question", _QUESTION_CUES),
    ("count", _COUNT_CUES),
)


def _dict_value_type(type_str: str) -> str | None:
    m = re.fullmatch(r"dict\[\s*str\s*,\s*(.+)\]", type_str.strip())
    return m.group(1).strip() if m else None


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _finish(spec: FieldSpec, value: Any) -> Any:
    """Optional fields say "nothing found" with None rather than an empty value."""
    if spec.optional and _empty(value):
        return None
    return value


# --------------------------------------------------------------------------------------------------
# Knowledge-item extraction
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Facts:
    """Everything extraction may need from one raw text, computed once."""

    raw: str
    turn: tx.Turn
    dates: list[str]
    names: list[str]
    keywords: list[str]

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
    str_roles = {_role(s, _ITEM_STR_ROLES) for s in fields if s.base == "str"}
    has_meta_dict = any(_dict_value_type(s.type) in ("str", "any") for s in fields)
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
    role = _role(spec, _ITEM_STR_ROLES)
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
    return f.raw if keep_header else f.body


def _list_value(spec: FieldSpec, f: _Facts) -> list[Any]:
    item = spec.item_type or "any"
    if item in ("int", "float"):
        numbers = [tx.first_number(n) for n in tx.find_numbers(f.body)]
        cast = int if item == "int" else float
        return [cast(n) for n in numbers if n is not None]
    if item != "str":
        return []
    role = _role(spec, _ITEM_LIST_ROLES)
    if role == "date":
        return list(f.dates)
    if role == "speaker":
        return list(f.names)
    if role == "sentences":
        return tx.split_sentences(f.body)
    return list(f.keywords)


def _item_value(spec: FieldSpec, f: _Facts, keep_header: bool) -> Any:
    base = spec.base
    if base == "str":
        return _str_value(spec, f, keep_header)
    if base in ("int", "float"):
        if _role(spec, _ITEM_STR_ROLES) == "year":
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
        return dict(_meta(f)) if _dict_value_type(spec.type) in ("str", "any") else {}
    # ``any`` and anything the type language does not name: the text itself is always valid JSON.
    return f.raw


def extract_item(fields: list[FieldSpec], raw_text: str) -> dict[str, Any]:
    """Fill every field of a KnowledgeItem from one raw text, each with a value of its JSON type."""
    f = _facts(raw_text)
    keep_header = not _holds_context(fields)
    return {spec.name: _finish(spec, _item_value(spec, f, keep_header)) for spec in fields}


# --------------------------------------------------------------------------------------------------
# Query building
# --------------------------------------------------------------------------------------------------


def _query_value(spec: FieldSpec, question: str) -> Any:
    role = _role(spec, _QUERY_ROLES)
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
    return {spec.name: _finish(spec, _query_value(spec, q)) for spec in fields}


# --------------------------------------------------------------------------------------------------
# Answering
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    """One context sentence with what its line says about who and when."""

    order: int
    line: int
    sentence: str
    speaker: str
    anchor: tx.DateMention | None
    terms: frozenset[str]


def _context_units(text: str) -> list[_Unit]:
    units: list[_Unit] = []
    anchor: tx.DateMention | None = None
    for line_no, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        turn = tx.parse_turn(line)
        line_dates = [d for d in tx.find_dates(line) if d.day and d.year]
        if turn.date is not None and turn.date.year:
            anchor = turn.date
        elif line_dates:
            anchor = line_dates[0]
        # Otherwise keep the previous anchor: lines under a session header inherit its date.
        extra = tx.content_stems(f"{turn.speaker} {turn.header}")
        for sentence in tx.split_sentences(turn.body) or [turn.body]:
            terms = frozenset(tx.content_stems(sentence) + extra)
            units.append(_Unit(len(units), line_no, sentence, turn.speaker, anchor, terms))
    return units


def _question_type(question: str) -> str:
    q = " ".join(tx.tokenize(question))
    first = q.split(" ", 1)[0] if q else ""
    if re.search(r"\b(what|which) year\b", q):
        return "year"
    if re.search(r"\b(what|which) month\b", q):
        return "month"
    if first == "when" or re.search(r"\b(what|which) (date|day|time)\b", q):
        return "when"
    if re.search(r"\bhow (many|much|old)\b", q):
        return "number"
    if re.search(r"\bhow long\b", q):
        return "duration"
    if first in ("who", "whom", "whose") or re.search(r"\bwith whom\b", q):
        return "who"
    if first == "where" or re.search(r"\b(what|which) (city|country|town|place|state|location|area)\b", q):
        return "where"
    if re.search(r"\bname\b", q) and first in ("what", "which"):
        return "name"
    return "other"


def _not_in_question(candidate: str, q_tokens: set[str]) -> bool:
    return not any(t in q_tokens for t in tx.tokenize(candidate))


def _date_span(unit: _Unit, qtype: str) -> str | None:
    """The unit's own date expression, resolved against its line's date, else the line's date."""
    mentions: list[tuple[int, str]] = []
    for d in tx.find_dates(unit.sentence):
        if d.year is None and unit.anchor is not None and unit.anchor.year:
            mentions.append((d.start, tx.format_date(unit.anchor.year, d.month, d.day)))
        else:
            mentions.append((d.start, d.text))
    for r in tx.find_relative_dates(unit.sentence):
        resolved = tx.resolve_relative(r.text, unit.anchor)
        if resolved:
            mentions.append((r.start, resolved))
    mentions.sort(key=lambda m: m[0])
    span = mentions[0][1] if mentions else (unit.anchor.text if unit.anchor else None)
    if span is None:
        return None
    if qtype == "year":
        years = re.findall(r"\b(?:1[89]|20)\d\d\b", span)
        return years[-1] if years else None
    if qtype == "month":
        found = tx.find_dates(span)
        if found and found[0].month:
            return tx.format_date(found[0].year, found[0].month, None)
    return span


_DURATION_RE = re.compile(
    r"\b(?:\d+|a few|a couple of|several|a|an|one|two|three|four|five|six|seven|eight|nine|ten|"
    r"eleven|twelve|twenty)\s+(?:years?|months?|weeks?|days?|hours?|minutes?)\b",
    re.IGNORECASE,
)


def _typed_span(unit: _Unit, qtype: str, q_tokens: set[str]) -> str | None:
    s = unit.sentence
    if qtype in ("when", "year", "month"):
        return _date_span(unit, qtype)
    if qtype == "number":
        numbers = tx.find_numbers(s)
        money = [n for n in numbers if n.startswith("$")]
        return (money or numbers or [None])[0]
    if qtype == "duration":
        m = _DURATION_RE.search(s)
        return m.group(0) if m else None
    if qtype in ("who", "name"):
        names = [n for n in tx.find_names(s) if _not_in_question(n.text, q_tokens)]
        names.sort(key=lambda n: (n.sentence_initial, n.start))
        if names:
            return names[0].text
        if qtype == "who" and unit.speaker and _not_in_question(unit.speaker, q_tokens):
            return unit.speaker
        return None
    if qtype == "where":
        places = [p for p in tx.find_places(s) if _not_in_question(p, q_tokens)]
        places += [p for p in tx.find_common_places(s) if _not_in_question(p, q_tokens)]
        return places[0] if places else None
    return None


_SPAN_TOKEN_RE = re.compile(r"[A-Za-z0-9$][\w'\-$%.]*[\w%]|[A-Za-z0-9$]|[,;:.!?()\"\u2014\u2013]")
_MAX_SPAN_WORDS = 8
_JSON_KEY_RE = re.compile(r"[\"'][A-Za-z_][\w ]{0,30}[\"']\s*:")


def _generic_span(sentence: str, q_tokens: set[str], q_stems: set[str]) -> str:
    """The sentence's content words minus the question's own words, in order, capped in length.

    Measured on LoCoMo with the evidence turn in context, dropping stop words beats keeping clause
    fragments: gold answers are short noun phrases, so every kept function word costs precision.
    """
    # Dates and JSON keys are never the answer to a non-date question; they only cost precision.
    text = tx.fold_quotes(sentence)
    for d in reversed(tx.find_dates(text)):
        text = text[: d.start] + " " + text[d.end :]
    text = _JSON_KEY_RE.sub(" ", text)
    kept: list[str] = []
    for tok in _SPAN_TOKEN_RE.findall(text):
        if not (tok[0].isalnum() or tok[0] == "$"):
            continue
        low = tok.lower()
        bare = low[:-2] if low.endswith("'s") else low
        if bare in tx.STOP_WORDS or bare in tx.QUESTION_WORDS or bare in q_tokens:
            continue
        if tx.stem(bare) in q_stems:
            continue
        kept.append(tok)
        if len(kept) >= _MAX_SPAN_WORDS:
            break
    return " ".join(kept) if kept else sentence.strip()


_TYPE_BONUS = 0.5
_LINE_WEIGHT = 0.5
_QUESTION_PENALTY = 0.5
_SPAN_CANDIDATES = 3
_SPAN_SCORE_RATIO = 0.75


def answer_from_context(context: str, question: str) -> str:
    """Pick the best-supported sentence for the question, then cut the span the question asks for."""
    units = _context_units(context)
    q_stems = set(tx.content_stems(question))
    if not units or not q_stems:
        return IDK
    q_tokens = set(tx.tokenize(question))
    qtype = _question_type(question)
    idf = tx.idf_weights(u.terms for u in units)

    line_terms: dict[int, set[str]] = {}
    for unit in units:
        line_terms.setdefault(unit.line, set()).update(unit.terms)

    ranked: list[tuple[float, int, _Unit]] = []
    for unit in units:
        # sorted: float sums must not depend on set iteration order
        own = sum(idf[t] for t in sorted(q_stems & unit.terms))
        rest = sum(idf[t] for t in sorted((q_stems & line_terms[unit.line]) - unit.terms))
        if own <= 0:
            continue
        # The rest of the turn is weaker evidence that this sentence is the one being asked about.
        score = own + _LINE_WEIGHT * rest
        if unit.sentence.rstrip().endswith("?"):
            score *= _QUESTION_PENALTY  # a question in the context asks; it rarely answers
        if qtype != "other" and _typed_span(unit, qtype, q_tokens) is not None:
            # Only "when" spans can come from the header; a date in the sentence itself is stronger.
            if qtype not in ("when", "year", "month") or tx.find_dates(unit.sentence) or tx.find_relative_dates(
                unit.sentence
            ):
                score += _TYPE_BONUS
        ranked.append((score, unit.order, unit))
    if not ranked:
        return IDK
    ranked.sort(key=lambda r: (-r[0], r[1]))
    top = ranked[0][0]

    if qtype != "other":
        for score, _, unit in ranked[:_SPAN_CANDIDATES]:
            if score < top * _SPAN_SCORE_RATIO:
                break
            span = _typed_span(unit, qtype, q_tokens)
            if span:
                return span
    return _generic_span(ranked[0][2].sentence, q_tokens, q_stems)


# --------------------------------------------------------------------------------------------------
# Toolkit completions
# --------------------------------------------------------------------------------------------------

_TOOLKIT_MAX_SENTENCES = 5


def _split_request(content: str) -> tuple[str, list[str]]:
    """(request, material lines): question lines are the request, else the first paragraph/line."""
    lines = content.splitlines()
    if any("?" in line for line in lines):
        request = "\n".join(line for line in lines if "?" in line)
        return request, [line for line in lines if "?" not in line]
    if "\n\n" in content.strip():
        head, rest = content.strip().split("\n\n", 1)
        return head, rest.splitlines()
    non_empty = [line for line in lines if line.strip()]
    if len(non_empty) > 1:
        return non_empty[0], non_empty[1:]
    sentences = tx.split_sentences(content)
    return (sentences[0], sentences[1:]) if sentences else ("", [])


def _material_units(lines: list[str]) -> list[str]:
    """Sentences of the material; later sentences of a "[date] Speaker:" line keep that prefix."""
    units: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        turn = tx.parse_turn(line)
        sentences = tx.split_sentences(line)
        prefix = ""
        if turn.header:
            prefix = f"[{turn.header}] " + (f"{turn.speaker}: " if turn.speaker else "")
        for i, sentence in enumerate(sentences):
            units.append(sentence if i == 0 or not prefix else prefix + sentence)
    return units


def toolkit_answer(messages: list[dict[str, str]]) -> str:
    """The material sentences most related to the request, in their original order."""
    users = [m.get("content", "") or "" for m in messages if m.get("role") == "user"]
    content = users[-1] if users else "\n".join(m.get("content", "") or "" for m in messages)
    if not content.strip():
        return ""
    request, material = _split_request(content)
    units = _material_units(material)
    if not units:
        return content.strip()
    req = set(tx.content_stems(request))
    idf = tx.idf_weights(set(tx.content_stems(u)) for u in units)
    scored = []
    for i, unit in enumerate(units):
        matched = sorted(req & set(tx.content_stems(unit)))
        scored.append((sum(idf[t] for t in matched), i))
    related = [r for r in scored if r[0] > 0]
    if related:
        related.sort(key=lambda r: (-r[0], r[1]))
        chosen = sorted(i for _, i in related[:_TOOLKIT_MAX_SENTENCES])
    else:
        # Nothing matches (e.g. "Summarise the following:"): the opening sentences are the fallback.
        chosen = list(range(min(_TOOLKIT_MAX_SENTENCES, len(units))))
    out = "\n".join(units[i] for i in chosen)
    return out[: len(content)]


# --------------------------------------------------------------------------------------------------
# The backend
# --------------------------------------------------------------------------------------------------


class OfflineBackend:
    """The deterministic, network-free task agent (``name = "offline"``); rules, not a model.

    ``calls`` counts protocol steps served (``extract``/``query``/``answer``/``toolkit``) so callers
    can report how much work a run did. Instructions are accepted for protocol compatibility but do
    not change behaviour: there is no model to instruct.
    """

    name = "offline"

    def __init__(self) -> None:
        self.calls: dict[str, int] = {"extract": 0, "query": 0, "answer": 0, "toolkit": 0}

    def extract_item(self, instruction: str, fields: list[FieldSpec], raw_text: str) -> dict[str, Any]:
        self.calls["extract"] += 1
        return extract_item(fields, raw_text)

    def build_query(self, instruction: str, fields: list[FieldSpec], question: str) -> dict[str, Any]:
        self.calls["query"] += 1
        return build_query(fields, question)

    def answer(self, instruction: str, always_on: str, context: str, question: str) -> str:
        self.calls["answer"] += 1
        # The retrieved context comes first so that, on ties, it wins over always-on text.
        combined = "\n".join(part for part in (context or "", always_on or "") if part.strip())
        if not combined.strip():
            return IDK
        return answer_from_context(combined, question)

    def toolkit_completion(self, messages: list[dict[str, str]]) -> str:
        self.calls["toolkit"] += 1
        return toolkit_answer(messages)

    def usage(self) -> dict[str, StepUsage]:
        return {}  # no model, nothing to cache or pay for
