"""The answer step's offline stand-in: the context sentence that best matches the question, and a short span cut
out of it. The offline agent's shared steps read questions the same way (``mstar_ray.agent.offline``: the
query's fields, a toolkit request to answer from material)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from mstar_ray import text as tx
from mstar_ray.families.step import Shown
from mstar_ray.statements import statements

IDK = "I don't know"

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
    for s in statements(text):
        extra = tx.content_stems(f"{s.speaker} {s.header}")
        units.append(_Unit(s.order, s.line, s.sentence, s.speaker, s.anchor,
                           frozenset(tx.content_stems(s.sentence) + extra)))
    return units


def question_type(question: str) -> str:
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


# A span token is a word start, then the longest stretch of word characters and "'-$%." that ends on a word
# character or "%" (or the start alone), or a punctuation mark. As one pattern that was quadratic on a run of
# "$" (each start failed again over the rest of the run), so runs are matched whole and cut by ``_span_tokens``.
_SPAN_RUN_RE = re.compile(r"[A-Za-z0-9$][\w'\-$%.]*|[,;:.!?()\"\u2014\u2013]")
_SPAN_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789$")
_SPAN_END_RE = re.compile(r"[\w%][^\w%]*\Z")
_MAX_SPAN_WORDS = 8
_JSON_KEY_RE = re.compile(r"[\"'][A-Za-z_][\w ]{0,30}[\"']\s*:")


def _span_tokens(text: str) -> list[str]:
    """The span tokens of ``text`` in order, in linear time."""
    out: list[str] = []
    for run in _SPAN_RUN_RE.findall(text):
        if run[0] not in _SPAN_START:
            out.append(run)  # a punctuation mark
            continue
        # The token from the run's start reaches its last word character or "%"; after that only "'-$." are
        # left, each a token of its own ("$", ".") or nothing ("'", "-").
        end = _SPAN_END_RE.search(run, 1)
        last = end.start() if end else 0
        out.append(run[: last + 1])
        out += [c for c in run[last + 1:] if c in "$."]
    return out


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
    for tok in _span_tokens(text):
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


# A reply this short that shares nothing with the question is itself the answer (a memory that answered for
# the model: "7 May 2023", "Likely no"); a model asked the question would repeat it.
_SHORT_ANSWER_WORDS = 8
_BULLET = re.compile(r"^\s*(?:[-*\u2022]+|\d{1,2}[.)])\s*")


_LIST_LABEL = re.compile(r"^\s*[\w ]{1,30}:\s*")


def _is_bare_list(sentence: str) -> bool:
    """A labelled or bare list of three or more short items ("Entities: Mel, Caroline, Sweden")."""
    items = [part for part in re.split(r"[,|;]", _LIST_LABEL.sub("", sentence, count=1)) if part.strip()]
    return len(items) >= 3 and all(len(part.split()) <= 3 for part in items)


def rank_sentences(context: str, question: str) -> list[tuple[float, "_Unit"]]:
    """The context's sentences that share content with the question, best-supported first."""
    units = _context_units(context)
    q_stems = set(tx.content_stems(question))
    if not units or not q_stems:
        return []
    q_tokens = set(tx.tokenize(question))
    qtype = question_type(question)
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
        elif qtype == "other" and _is_bare_list(unit.sentence):
            score *= _QUESTION_PENALTY  # "participants: A, B, C" names what a record is about; it states nothing
        if qtype != "other" and _typed_span(unit, qtype, q_tokens) is not None:
            # Only "when" spans can come from the header; a date in the sentence itself is stronger.
            if qtype not in ("when", "year", "month") or tx.find_dates(unit.sentence) or tx.find_relative_dates(
                unit.sentence
            ):
                score += _TYPE_BONUS
        ranked.append((score, unit.order, unit))
    ranked.sort(key=lambda r: (-r[0], r[1]))
    return [(score, unit) for score, _, unit in ranked]


def support(context: str, question: str) -> float:
    """The largest share of the question's content (idf-weighted) that one context sentence states, in [0, 1]. A
    word the context never uses weighs as much as its rarest word: the question asks about something not there."""
    units = _context_units(context)
    asked = set(tx.content_stems(question))
    if not units or not asked:
        return 0.0
    idf = tx.idf_weights(u.terms for u in units)
    rarest = math.log(1.0 + len(units))
    total = sum(idf.get(t, rarest) for t in sorted(asked))
    return max(sum(idf[t] for t in sorted(asked & u.terms)) for u in units) / total


def short_reply(context: str) -> str | None:
    """The context itself when it is a bare answer (one short line, no speaker or date), else None."""
    lines = [_BULLET.sub("", line).strip() for line in context.strip().splitlines() if line.strip()]
    if len(lines) != 1 or not 0 < len(lines[0].split()) <= _SHORT_ANSWER_WORDS:
        return None
    turn = tx.parse_turn(lines[0])
    if turn.header or turn.speaker:
        return None  # a remembered line, not an answer someone gave
    return lines[0].rstrip(".")


def answer_from_context(context: str, question: str) -> str:
    """Pick the best-supported sentence for the question, then cut the span the question asks for."""
    ranked = rank_sentences(context, question)
    if not ranked:
        return short_reply(context) or IDK
    q_stems = set(tx.content_stems(question))
    q_tokens = set(tx.tokenize(question))
    qtype = question_type(question)
    top = ranked[0][0]
    if qtype != "other":
        for score, unit in ranked[:_SPAN_CANDIDATES]:
            if score < top * _SPAN_SCORE_RATIO:
                break
            span = _typed_span(unit, qtype, q_tokens)
            if span:
                return span
    return _generic_span(ranked[0][1].sentence, q_tokens, q_stems)


def answer(shown: Shown, question: str) -> str:
    # What memory returned for this question is the evidence; always-on text is mostly how to answer (a
    # policy, a format), so a model reads the answer out of it only when the context has nothing on the question.
    for evidence in (shown.context or "", shown.always_on or ""):
        if evidence.strip():
            found = answer_from_context(evidence, question)
            if found != IDK:
                return found
    return IDK
