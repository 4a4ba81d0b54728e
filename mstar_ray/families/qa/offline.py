"""The answer step's offline stand-in: the context sentence that best matches the question, and a short span cut
out of it. The offline agent's shared steps read questions the same way (``mstar_ray.agent.offline``: the
query's fields, a toolkit request to answer from material).

It reads its context as a model would, and only its context (``answer``):

- words first, then meaning: when no sentence shares a word of what is asked beyond its names ("What car does
  Ines drive now?" against "I traded in the Toyota for a shiny Fiat"), the sentences about the people named are
  ranked by closeness in meaning under the run's embedding model (``mstar_ray.families.meaning``), and the
  span is the word closest to the kind asked for ("car" -> "Fiat");
- two hops: a person named by a relation ("the person who adopted Bramble") is first found from the sentence
  that states the relation, and the question is then answered about them;
- what holds now: for "now / currently / these days / latest", the most recent dated statement among the
  best-supported ones, and in a statement of change the value taken, not the one left ("sold my Kia").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from mstar_ray import text as tx
from mstar_ray.families import meaning
from mstar_ray.families.step import Shown
from mstar_ray.statements import Statement, is_fact, statements

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
    statement: Statement


def _context_units(text: str) -> list[_Unit]:
    units: list[_Unit] = []
    for s in statements(text):
        extra = tx.content_stems(f"{s.speaker} {s.header}")
        units.append(_Unit(s.order, s.line, s.sentence, s.speaker, s.anchor,
                           frozenset(tx.content_stems(s.sentence) + extra), s))
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
        return (money or numbers)[0] if numbers else None  # money is among numbers
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


# What holds now is asked with one of these; the latest statement of its kind answers it.
_NOW_RE = re.compile(r"\b(?:now|currently|current|these days|nowadays|latest|at the moment|at present|still)\b",
                     re.IGNORECASE)
# A person named by a relation: "the person who adopted Bramble", "the owner of Rocket", "the one whose cousin is
# Rosa". What follows is the relation, resolved from the context before the question is answered about them.
_DESCRIBED_RE = re.compile(r"\bthe (?:person|one|man|woman|owner|friend|colleague|neighbou?r)\s+(?:who|whose|that|of)\s+",
                           re.IGNORECASE)
# In a statement of change, the value left is marked so ("sold my Kia", "gone off birdwatching", "Japanese just
# wasn't clicking"); what holds now is the other one.
_LEFT_BEFORE_RE = re.compile(r"\b(?:old|former|previous|ex|sold|quit|left|dropped|goodbye|gone off|done being|stopped|"
                             r"traded in|gave up|moved from|switched from|used to be)\b(?:\W+\w+){0,2}\W*$", re.IGNORECASE)
_LEFT_AFTER_RE = re.compile(r"^\W*(?:\w+\W+){0,2}(?:wasn't|isn't|no longer|anymore|is over)\b", re.IGNORECASE)
# Statements at least this share as close in meaning as the best one are of its kind: candidates for what holds now.
_MEANING_SHARE = 0.6
_LEFT_PENALTY = 0.2
# A pair of words is the span over either word alone only when it is this much closer in meaning ("civil engineer").
_PAIR_PENALTY = 0.05
_LEFT_WORD_RE = re.compile(r"\b(?:old|former|previous|ex)\b", re.IGNORECASE)


def asks_now(question: str) -> bool:
    return bool(_NOW_RE.search(question))


def _latest_first(ranked: list[tuple[float, _Unit]], floor: float) -> list[tuple[float, _Unit]]:
    """``ranked`` with the most recent dated unit scoring at least ``floor`` moved to the front."""
    close = [(score, unit) for score, unit in ranked if score >= floor]
    dated = [(unit.anchor.as_date, unit.order, score, unit) for score, unit in close
             if unit.anchor is not None and unit.anchor.as_date is not None]
    if not dated:
        return ranked
    *_, score, latest = max(dated, key=lambda d: (d[0], d[1]))
    return [(score, latest)] + [(s, u) for s, u in ranked if u is not latest]


def _name_stems(question: str) -> set[str]:
    return {stem for n in tx.find_names(question) if not n.sentence_initial for stem in tx.content_stems(n.text)}


def _category(question: str, names: set[str]) -> str | None:
    """The kind of thing asked for ("car" in "What car does Ines drive now?", "job" in "What is the current job of
    Emil?"), when the question names one right after its question word."""
    m = re.match(r"\s*(?:what|which)\s+(?:is|are|was|were)?\s*(?:the|his|her|their)?\s*(?:current|latest|new)?\s*"
                 r"([a-z]+)\b", question, re.IGNORECASE)
    if m is None:
        return None
    word = m.group(1).lower()
    if word in tx.STOP_WORDS or word in tx.QUESTION_WORDS or tx.stem(word) in names:
        return None
    return word


def _is_left(sentence: str, start: int, end: int) -> bool:
    return bool(_LEFT_BEFORE_RE.search(sentence[:start]) or _LEFT_AFTER_RE.search(sentence[end:])
                or _LEFT_WORD_RE.search(sentence[start:end]))


def _instance_span(sentence: str, category: str, q_tokens: set[str]) -> str | None:
    """The word or pair of words of ``sentence`` closest in meaning to ``category``, a value the sentence says was
    left counting less; None without an embedding model."""
    words = [(m.start(), m.end(), m.group(0)) for m in re.finditer(r"[A-Za-z][\w'\-]*", tx.fold_quotes(sentence))]
    content = [(s, e, w) for s, e, w in words if w.lower() not in tx.STOP_WORDS and w.lower() not in q_tokens
               and w.lower() not in tx.QUESTION_WORDS and not tx.find_relative_dates(w)]
    candidates = [(s, e, w) for s, e, w in content]
    for (s1, _, w1), (s2, e2, w2) in zip(content, content[1:]):
        if re.fullmatch(r"\s+", sentence[s1 + len(w1):s2]):
            candidates.append((s1, e2, f"{w1} {w2}"))
    if not candidates:
        return None
    sims = meaning.similarities(category, [w for *_, w in candidates])
    if sims is None:
        return None
    scored = [(sim - (_LEFT_PENALTY if _is_left(sentence, s, e) else 0.0) - (_PAIR_PENALTY if " " in w else 0.0), -s, w)
              for sim, (s, e, w) in zip(sims, candidates)]
    return max(scored)[2]


def _by_meaning(units: list[_Unit], question: str, names: set[str]) -> list[tuple[float, _Unit]] | None:
    """The context's statements about the people the question names, closest in meaning to what it asks about
    them first; None without an embedding model. Names are left out on both sides: they choose whose statements
    are read, and in a short sentence a shared name outweighs what it says."""
    facts = [u for u in units if is_fact(u.statement)]
    about = [u for u in facts if names & u.terms] if names else []
    pool = about or facts
    if not pool:
        return None
    asked = question
    for name in tx.find_names(question):
        if not name.sentence_initial:
            asked = asked.replace(name.text, " ")
    sims = meaning.similarities(" ".join(asked.split()), [u.sentence for u in pool])
    if sims is None:
        return None
    return sorted(zip(sims, pool), key=lambda r: (-r[0], r[1].order))


def _resolve_described(context: str, question: str) -> str | None:
    """The question with the person it names by a relation replaced by who the context says that is, or None."""
    m = _DESCRIBED_RE.search(question)
    if m is None:
        return None
    relation = question[m.end():]
    ranked = rank_sentences(context, relation)
    if not ranked:
        return None
    unit = ranked[0][1]
    q_tokens = set(tx.tokenize(question))
    names = [n.text for n in tx.find_names(unit.sentence) if _not_in_question(n.text, q_tokens)]
    who = unit.speaker if unit.speaker and _not_in_question(unit.speaker, q_tokens) else (names[0] if names else None)
    if who is None:
        return None
    # What the first statement settled is no longer asked: keep only the relation's words it did not state.
    rest = [w for w in re.findall(r"[\w'\-]+|[?]", relation)
            if w == "?" or tx.stem(w.lower()) not in unit.terms]
    return f"{question[:m.start()]}{who} {' '.join(rest)}".replace(" ?", "?")


def answer_from_context(context: str, question: str) -> str:
    """Pick the best-supported sentence for the question, then cut the span the question asks for."""
    resolved = _resolve_described(context, question)
    if resolved is not None:
        question = resolved
    ranked = rank_sentences(context, question)
    if not ranked:
        return short_reply(context) or IDK
    q_stems = set(tx.content_stems(question))
    q_tokens = set(tx.tokenize(question))
    qtype = question_type(question)
    names = _name_stems(question)
    now = asks_now(question)
    category = _category(question, names)
    units = _context_units(context)
    # What is asked about the people who speak in the context; a name that is not a speaker (a pet, a country)
    # is part of what is asked.
    speakers = {stem for u in units for stem in tx.content_stems(u.speaker)}
    topical = q_stems - (names & speakers) - {tx.stem(w) for w in tx.tokenize(" ".join(_NOW_RE.findall(question)))}
    if topical and meaning.available() and not any(topical & unit.terms for _, unit in ranked):
        # Nothing in the context uses a word of what is asked: read for meaning instead, as a model does.
        by_meaning = _by_meaning(units, question, names)
        if by_meaning:
            best = by_meaning[0][0]
            if now:
                by_meaning = _latest_first(by_meaning, best * _MEANING_SHARE)
            unit = by_meaning[0][1]
            if qtype != "other":
                span = _typed_span(unit, qtype, q_tokens)
                if span:
                    return span
            if category is not None:
                span = _instance_span(unit.sentence, category, q_tokens)
                if span:
                    return span
            return _generic_span(unit.sentence, q_tokens, q_stems)
    top = ranked[0][0]
    if now:
        ranked = _latest_first(ranked, top * _SPAN_SCORE_RATIO)
    if qtype != "other":
        for score, unit in ranked[:_SPAN_CANDIDATES]:
            if score < top * _SPAN_SCORE_RATIO:
                break
            span = _typed_span(unit, qtype, q_tokens)
            if span:
                return span
    if now and category is not None:
        span = _instance_span(ranked[0][1].sentence, category, q_tokens)
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
