"""Plain-text analysis: turns, sentences, tokens, stems, stop words, dates, names, numbers.

Used by the offline task agent (``mstar_ray.agent.offline``) and the lexical embedder
(``mstar_ray.embedding.hashing``); it imports nothing of mstar_ray, so either may use it. Everything here
is deterministic and rule-based (regular expressions and small word lists), so the offline backend gives
the same output in every process. Nothing here knows about schemas or prompts.
"""

from __future__ import annotations

import bisect
import calendar
import datetime as dt
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

# ---------------------------------------------------------------------------------------------------
# Word lists
# ---------------------------------------------------------------------------------------------------

# "may" is deliberately absent: as a month it carries date information that matching must keep.
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
    don't down during each else ever few for from further get gets getting got had hadn't has hasn't
    have haven't having he he'd he'll he's her here here's hers herself him himself his how how's i
    i'd i'll i'm i've if in into is isn't it it's its itself just let's like me might more most much
    must mustn't my myself no nor not now of off on once only or other ought our ours ourselves out
    over own quite rather really same shall shan't she she'd she'll she's should shouldn't so some
    such than that that's the their theirs them themselves then there there's these they they'd
    they'll they're they've this those through to too under until up upon us very was wasn't we we'd
    we'll we're we've were weren't what what's when when's where where's whether which while who
    who's whom whose why why's will with won't would wouldn't you you'd you'll you're you've your
    yours yourself yourselves yes yeah yep oh ok okay wow hey hi hello thanks thank um uh hmm lol
    gonna wanna kind sort lot lots thing things something anything everything one ones pretty still
    even way well sure totally definitely actually absolutely going go goes went gone make makes made
    making really always never sometimes often maybe
    """.split()
)

# Words that open a question and say what kind of answer it wants; never content.
QUESTION_WORDS: frozenset[str] = frozenset(
    "what when where who whom whose which why how did does do is are was were has have had can could "
    "would will should kind type".split()
)

MONTHS: dict[str, int] = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
MONTH_NAMES: tuple[str, ...] = tuple(calendar.month_name)  # index 1..12 -> "January".."December"

WEEKDAYS: tuple[str, ...] = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

NUMBER_WORDS: dict[str, int] = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
                     "ninety": 90, "hundred": 100, "thousand": 1000, "dozen": 12, "couple": 2})

# Capitalised words that are not names even away from the start of a sentence.
_NOT_NAMES: frozenset[str] = frozenset(
    set(STOP_WORDS) | set(MONTHS) | set(WEEKDAYS)
    | set("yesterday today tomorrow tonight last next this mr mrs ms dr".split())
)

_ABBREVIATIONS: frozenset[str] = frozenset("mr mrs ms dr st jr sr vs etc e.g i.e no prof inc".split())

# ---------------------------------------------------------------------------------------------------
# Tokens and stemming
# ---------------------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)*")
_VOWEL_RE = re.compile(r"[aeiouy]")


def fold_quotes(text: str) -> str:
    """Fold typographic apostrophes so "Alice’s" tokenises like "Alice's"."""
    return text.replace("\u2019", "'").replace("\u2018", "'")


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens; a possessive "'s" is dropped so "Alice's" matches "Alice"."""
    out: list[str] = []
    for tok in _TOKEN_RE.findall(fold_quotes(text)):
        tok = tok.lower()
        if tok.endswith("'s") and tok not in STOP_WORDS:
            tok = tok[:-2]
        out.append(tok)
    return out


def _is_vowel(word: str, i: int) -> bool:
    """A "y" after a consonant is a vowel ("try"), after a vowel or first a consonant ("yes", "play")."""
    c = word[i]
    if c in "aeiou":
        return True
    return c == "y" and i > 0 and not _is_vowel(word, i - 1)


def _one_short_syllable(word: str) -> bool:
    """One vowel group closed by one consonant that is not w, x or y: "car", "hop", "plan", "strip".

    Such a word may be a word of its own beside the same letters with a silent "e" ("car"/"care",
    "hop"/"hope"), so the "e" is meaning, not inflection; with more syllables, or a closing
    consonant pair ("breath"), the "e" is only spelling.
    """
    if len(word) < 3 or word[-1] in "wxy":
        return False
    if _is_vowel(word, len(word) - 1) or not _is_vowel(word, len(word) - 2) or _is_vowel(word, len(word) - 3):
        return False
    kinds = "".join("v" if _is_vowel(word, i) else "c" for i in range(len(word)))
    return len(re.findall(r"v+c+", kinds)) == 1


def stem(word: str) -> str:
    """A light suffix stripper: "adopted"/"adopts"/"adopting"/"adoption" -> "adopt".

    Deliberately crude (a few rules, not Porter's): both sides of every comparison go through it, so only
    consistency matters, and the vowel check keeps short words like "thing" or "bring" intact. One rule
    keeps different words apart: a silent "e" after one short syllable stays ("care" -> "care", never
    "car"), and "-ed"/"-ing" leaving such a syllable gets its "e" back ("caring" -> "care", "hoping" ->
    "hope") unless a doubled consonant says it had none ("hopping" -> "hop").
    """
    w = word.lower()
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    verb_ending = False
    for suffix in ("ingly", "edly", "ing", "ied", "ed", "ion", "ly"):
        if w.endswith(suffix):
            rest = w[: -len(suffix)]
            if suffix == "ied":
                rest += "y"
            if len(rest) >= 3 and _VOWEL_RE.search(rest):
                w = rest
                verb_ending = suffix in ("ingly", "edly", "ing", "ed")
            break
    if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "aeiouylsz":
        return w[:-1]  # "running" -> "runn" -> "run"
    if len(w) > 3 and w.endswith("e"):
        # "live"/"lived"/"living" all meet at "live"; "complete"/"completed" at "complet"
        return w if _one_short_syllable(w[:-1]) else w[:-1]
    if verb_ending and _one_short_syllable(w):
        return w + "e"
    return w


def content_words(text: str) -> list[str]:
    """Tokens that carry meaning: no stop words, no question words, no one-letter tokens."""
    return [t for t in tokenize(text) if t not in STOP_WORDS and t not in QUESTION_WORDS and len(t) > 1]


def content_stems(text: str) -> list[str]:
    return [stem(t) for t in content_words(text)]


def idf_weights(docs: Iterable[Iterable[str]]) -> dict[str, float]:
    """Smoothed inverse document frequency over term collections (each collection counted once)."""
    df: dict[str, int] = {}
    n = 0
    for doc in docs:
        n += 1
        for term in set(doc):
            df[term] = df.get(term, 0) + 1
    return {t: math.log(1.0 + n / c) for t, c in df.items()}


# ---------------------------------------------------------------------------------------------------
# Sentences and turns
# ---------------------------------------------------------------------------------------------------

# A boundary starts where a run of terminal punctuation starts (the lookbehind): started anywhere inside a run
# of 40,000 "!", the match failed again over the rest of it, quadratic in the run; the matches are the same.
_BOUNDARY_RE = re.compile(r"(?<![.!?])[.!?]+[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_LAST_WORD_CHARS = 32  # longer than any abbreviation: enough of what precedes a boundary to tell


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, one line at a time, never splitting after "Dr." or an initial."""
    out: list[str] = []
    for line in fold_quotes(text).splitlines():
        line = line.strip()
        if not line:
            continue
        start = 0
        for m in _BOUNDARY_RE.finditer(line):
            # Only the end of the text before the boundary: the whole of it, re-read at each abbreviation the
            # loop skips, was quadratic in a line of "Dr. A Dr. A ...".
            before = line[max(start, m.start() - _LAST_WORD_CHARS) : m.start()].rsplit(None, 1)
            last = before[-1].lower().rstrip(".") if before else ""
            if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
                continue
            piece = line[start : m.end()].strip()
            if piece:
                out.append(piece)
            start = m.end()
        tail = line[start:].strip()
        if tail:
            out.append(tail)
    return out


_BULLET_RE = re.compile(r"^\s*(?:[-*\u2022>]+|\d{1,3}[.)])\s+")
# "[8 May, 2023]" in LoCoMo; "(8 May 2023)" is how some memory programs print the same thing.
_HEADER_RE = re.compile(r"^\s*(?:\[([^\]\n]{1,80})\]|\(([^)\n]{1,80})\))\s*")
_SPEAKER_RE = re.compile(r"^([A-Z][\w'.\-]*(?:\s+[A-Z][\w'.\-]*){0,3})\s*:\s+")


@dataclass(frozen=True)
class SpeakerTurn:
    """A raw text split into its bracket header, speaker and what was said."""

    header: str
    speaker: str
    body: str
    date: DateMention | None


def parse_turn(text: str) -> SpeakerTurn:
    """Split ``"[1:56 pm on 8 May, 2023] Caroline: I went ..."`` into its parts.

    Any part may be missing; ``body`` is then the rest of the text, never lost.
    """
    rest = _BULLET_RE.sub("", fold_quotes(text).strip(), count=1)
    header = ""
    m = _HEADER_RE.match(rest)
    if m:
        header = (m.group(1) or m.group(2)).strip()
        rest = rest[m.end() :]
    speaker = ""
    m = _SPEAKER_RE.match(rest)
    if m and m.group(1).lower() not in _NOT_NAMES:
        speaker = m.group(1).strip()
        rest = rest[m.end() :]
    dates = find_dates(header) if header else []
    return SpeakerTurn(header=header, speaker=speaker, body=rest.strip(), date=dates[0] if dates else None)


# ---------------------------------------------------------------------------------------------------
# Dates
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DateMention:
    """An explicit date found in text; ``text`` is its tidy form, e.g. "8 May 2023"."""

    start: int
    end: int
    text: str
    year: int | None
    month: int | None
    day: int | None

    @property
    def as_date(self) -> dt.date | None:
        if self.year and self.month and self.day:
            try:
                return dt.date(self.year, self.month, self.day)
            except ValueError:
                return None
        return None


_MONTH_ALT = "|".join(
    sorted({n.capitalize() for n in MONTHS} | {n.upper() for n in MONTHS if len(n) > 3}, key=len, reverse=True)
)
_M = rf"(?P<mon>{_MONTH_ALT})\.?"
_D = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_Y = r"(?P<year>(?:1[89]|20)\d\d)"
# Ordered from most to least specific; earlier patterns claim their span first.
_DATE_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(rf"\b{_D}\s+(?:of\s+)?{_M},?\s+{_Y}\b"),
    re.compile(rf"\b{_M}\s+{_D},?\s+{_Y}\b"),
    re.compile(r"\b(?P<year>(?:1[89]|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_M},?\s+{_Y}\b"),
    re.compile(rf"\b{_D}\s+(?:of\s+)?{_M}\b"),
    re.compile(rf"\b{_M}\s+{_D}\b(?!:)"),
    re.compile(rf"(?<![\d:$.,])\b{_Y}\b(?![\d:]|\.\d|,\d)"),
)


def _mention(m: re.Match[str]) -> DateMention | None:
    g = m.groupdict()
    year = int(g["year"]) if g.get("year") else None
    month = int(g["month"]) if g.get("month") else (MONTHS[g["mon"].lower()] if g.get("mon") else None)
    day = int(g["day"]) if g.get("day") else None
    if day is not None and not 1 <= day <= 31:
        return None
    if month is not None and not 1 <= month <= 12:
        return None
    return DateMention(m.start(), m.end(), format_date(year, month, day), year, month, day)


def format_date(year: int | None, month: int | None, day: int | None) -> str:
    """LoCoMo's answer style: "7 May 2023", "May 2023", "2023", "7 May"."""
    parts: list[str] = []
    if day is not None and month is not None:
        parts.append(str(day))
    if month is not None:
        parts.append(MONTH_NAMES[month])
    if year is not None:
        parts.append(str(year))
    return " ".join(parts)


class _Spans:
    """Non-overlapping spans of a text, kept sorted, so whether a new one overlaps any takes a bisection: checked
    against every span taken so far, a text of thousands of dates took quadratic time (18 s on 32,000 characters)."""

    def __init__(self, spans: Iterable[tuple[int, int]] = ()):
        self.starts: list[int] = []
        self.ends: list[int] = []
        for start, end in sorted(spans):  # merged where they overlap or touch: the same text is covered
            if self.ends and start <= self.ends[-1]:
                self.ends[-1] = max(self.ends[-1], end)
            else:
                self.starts.append(start)
                self.ends.append(end)

    def overlaps(self, start: int, end: int) -> bool:
        # The spans that start before ``end``; the last of them ends last (they do not overlap).
        before = bisect.bisect_left(self.starts, end)
        return before > 0 and self.ends[before - 1] > start

    def add(self, start: int, end: int) -> None:
        """A span that overlaps none (``overlaps`` said so)."""
        at = bisect.bisect_left(self.starts, start)
        self.starts.insert(at, start)
        self.ends.insert(at, end)


def find_dates(text: str) -> list[DateMention]:
    """Explicit dates in ``text``, in order of appearance, non-overlapping, most specific first."""
    text = fold_quotes(text)
    taken: list[DateMention] = []
    spans = _Spans()
    for pattern in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            if spans.overlaps(m.start(), m.end()):
                continue
            mention = _mention(m)
            if mention is not None:
                taken.append(mention)
                spans.add(mention.start, mention.end)
    return sorted(taken, key=lambda d: d.start)


_NUM_ALT = r"\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|several"
_RELATIVE_RE = re.compile(
    r"\b(?:(?P<simple>yesterday|today|tonight|tomorrow|last night|this morning|this evening)"
    r"|(?P<dir>last|next|this|past)\s+(?P<unit>week(?:end)?|month|year|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    rf"|(?P<num>{_NUM_ALT})\s+(?P<agounit>day|week|month|year)s?\s+ago)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class RelativeMention:
    start: int
    end: int
    text: str


def find_relative_dates(text: str) -> list[RelativeMention]:
    """Relative time expressions ("yesterday", "last week", "two years ago"), in order."""
    return [RelativeMention(m.start(), m.end(), m.group(0)) for m in _RELATIVE_RE.finditer(fold_quotes(text))]


def _shift_month(year: int, month: int, delta: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + delta
    return index // 12, index % 12 + 1


def resolve_relative(expression: str, anchor: DateMention | None) -> str | None:
    """Turn "yesterday" said on 8 May 2023 into "7 May 2023" (LoCoMo's gold answers do this).

    Returns None when the anchor is too vague for the expression, so callers can fall back.
    """
    m = _RELATIVE_RE.fullmatch(expression.strip())
    if m is None or anchor is None:
        return None
    day = anchor.as_date
    if m.group("simple"):
        word = m.group("simple").lower()
        if day is None:
            return None
        if word in ("yesterday", "last night"):
            day = day - dt.timedelta(days=1)
        elif word == "tomorrow":
            day = day + dt.timedelta(days=1)
        return format_date(day.year, day.month, day.day)
    if m.group("dir"):
        direction, unit = m.group("dir").lower(), m.group("unit").lower()
        step = {"last": -1, "past": -1, "next": 1, "this": 0}[direction]
        if unit == "year":
            return str(anchor.year + step) if anchor.year else None
        if unit == "month":
            if anchor.year is None or anchor.month is None:
                return None
            y, mo = _shift_month(anchor.year, anchor.month, step)
            return format_date(y, mo, None)
        if day is None:
            return None
        relation = {-1: "before", 1: "after", 0: "of"}[step]
        label = unit.capitalize() if unit in WEEKDAYS else unit
        return f"the {label} {relation} {anchor.text}"
    n_text = m.group("num").lower()
    if n_text in ("a few", "a couple of", "several"):
        return m.group(0)  # no honest way to pin a vague count to a date; say it as it was said
    n = int(n_text) if n_text.isdigit() else NUMBER_WORDS.get(n_text, 1)
    unit = m.group("agounit").lower()
    if unit == "year":
        return str(anchor.year - n) if anchor.year else None
    if unit == "month":
        if anchor.year is None or anchor.month is None:
            return None
        y, mo = _shift_month(anchor.year, anchor.month, -n)
        return format_date(y, mo, None)
    if day is None:
        return None
    if unit == "day":
        day = day - dt.timedelta(days=n)
        return format_date(day.year, day.month, day.day)
    return f"{n} weeks before {anchor.text}"


# ---------------------------------------------------------------------------------------------------
# Names, places, numbers
# ---------------------------------------------------------------------------------------------------

_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'\-]*")


@dataclass(frozen=True)
class NameMention:
    text: str
    start: int
    sentence_initial: bool


def _strip_possessive(word: str) -> str:
    return word[:-2] if word.endswith("'s") else word


def find_names(text: str) -> list[NameMention]:
    """Runs of capitalised words that look like names ("Caroline", "New York"), in order.

    Stop words, months and weekdays break a run. A run that opens a sentence is kept but flagged,
    since a sentence-initial capital is weak evidence of a name.
    """
    text = fold_quotes(text)
    out: list[NameMention] = []
    run: list[str] = []
    run_start = run_end = 0
    closed = False

    def flush() -> None:
        if run:
            prefix = text[:run_start].rstrip()
            initial = not prefix or prefix[-1] in ".!?:\"'([]"
            out.append(NameMention(" ".join(run), run_start, initial))
            run.clear()

    for m in _WORD_RE.finditer(text):
        word = m.group(0)
        bare = _strip_possessive(word)
        if not (word[0].isupper() and len(bare) > 1 and bare.lower() not in _NOT_NAMES):
            flush()
            continue
        if run and (closed or text[run_end : m.start()] != " "):
            flush()
        if not run:
            run_start = m.start()
        run.append(bare)
        run_end = m.end()
        closed = bare != word  # a possessive ends the name: "Alice's dog"
    flush()
    return out


_PLACE_RE = re.compile(
    r"\b(?:in|to|at|from|near|into|around|visit(?:ed|ing)?|toward|towards)\s+(?:the\s+)?"
    r"((?:[A-Z][A-Za-z'\-]*)(?:\s+(?:of\s+)?[A-Z][A-Za-z'\-]*)*)"
)
# "my home country, Sweden": the place noun comes first and the proper name follows it.
_NAMED_PLACE_RE = re.compile(
    r"\b(?:country|city|town|state|island|village|hometown|region)(?:\s+of)?\s*,?\s+"
    r"((?:[A-Z][A-Za-z'\-]*)(?:\s+[A-Z][A-Za-z'\-]*)*)"
)
_LOWER_PLACE_RE = re.compile(
    r"\b(?:in|to|at|from|near|into)\s+((?:the|a|an|my|our|his|her|their)\s+[a-z][a-z\-]+(?:\s+[a-z][a-z\-]+)?)"
)


def find_places(text: str) -> list[str]:
    """Capitalised words after a place preposition ("in Lisbon", "to the Grand Canyon")."""
    text = fold_quotes(text)
    matches = sorted([*_PLACE_RE.finditer(text), *_NAMED_PLACE_RE.finditer(text)], key=lambda m: m.start())
    out: list[str] = []
    for m in matches:
        words = [_strip_possessive(w) for w in m.group(1).split()]
        while words and words[-1].lower() in _NOT_NAMES:
            words.pop()
        while words and words[0].lower() in _NOT_NAMES:
            words.pop(0)
        if words:
            out.append(" ".join(words))
    return out


def find_common_places(text: str) -> list[str]:
    """Lowercase place phrases after a preposition ("at the park"), for when no proper noun exists."""
    out: list[str] = []
    for m in _LOWER_PLACE_RE.finditer(fold_quotes(text)):
        words = m.group(1).split()
        while len(words) > 1 and words[-1] in _NOT_NAMES:
            words.pop()
        out.append(" ".join(words))
    return out


_NUMBER_RE = re.compile(
    r"(?:\$\s?)?\b\d+(?:[.,]\d+)*\b%?|\b(?:" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)


def find_numbers(text: str, skip_dates: bool = True) -> list[str]:
    """Numbers as written ("3", "$20", "three"), skipping digits inside dates and clock times."""
    text = fold_quotes(text)
    blocked: list[tuple[int, int]] = []
    if skip_dates:
        blocked = [(d.start, d.end) for d in find_dates(text)]
        blocked += [(m.start(), m.end()) for m in re.finditer(r"\b\d{1,2}:\d{2}\b", text)]
    spans = _Spans(blocked)
    out: list[str] = []
    for m in _NUMBER_RE.finditer(text):
        if spans.overlaps(m.start(), m.end()):
            continue
        out.append(m.group(0))
    return out


def first_number(text: str) -> float | None:
    """The first number in ``text`` as a float (number words included), or None."""
    for raw in find_numbers(text):
        word = raw.lower().lstrip("$ ").rstrip("%")
        if word in NUMBER_WORDS:
            return float(NUMBER_WORDS[word])
        try:
            return float(word.replace(",", ""))
        except ValueError:
            continue
    return None


def keywords(text: str, limit: int = 8) -> list[str]:
    """Salient words, in order of first appearance: names first, then longer content words."""
    names = [n.text for n in find_names(text) if not n.sentence_initial]
    seen: set[str] = set()
    out: list[str] = []
    for word in names + [w for w in content_words(text) if len(w) > 3 and not w.isdigit()]:
        key = word.lower()
        if key in seen or key in _NOT_NAMES:
            continue
        seen.add(key)
        out.append(word)
        if len(out) >= limit:
            break
    return out
