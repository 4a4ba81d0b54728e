"""What a text states, sentence by sentence, as a model would restate it: who said it, when, with relative
dates resolved ("yesterday" said on 8 May 2023 becomes "on 7 May 2023").

A text is read line by line: a line that is only a date ("[1:56 pm on 8 May, 2023]") or a labelled date
("Reference date: 8 May 2023") dates the lines under it, a line with its own header or full date dates itself,
and "Speaker: words" names who said it. A date stays inside the record it is written in: a separator line ("---")
or a record's label ("[doc 5]", "[Record 2]") starts another record, whose lines are undated until a date of its
own comes. Everything the offline stand-ins extract, summarise or answer from goes through here, so they all
read a text the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mstar_ray import text as tx

# Sentences with fewer content words than this are chatter ("Wow, that's cool!"), not facts.
MIN_FACT_WORDS = 3


@dataclass(frozen=True)
class Statement:
    """One sentence of a text with what its line says about who and when."""

    order: int
    line: int
    sentence: str
    speaker: str
    header: str
    anchor: tx.DateMention | None

    @property
    def is_question(self) -> bool:
        return self.sentence.rstrip().endswith("?")

    @property
    def resolved(self) -> str:
        """The sentence with its relative dates replaced by the dates they mean."""
        return resolve_dates(self.sentence, self.anchor)

    def render(self, with_date: bool = False) -> str:
        """"Speaker: sentence" with dates resolved; with ``with_date``, led by the line's date ("[8 May 2023] ")."""
        said = f"{self.speaker}: {self.resolved}" if self.speaker else self.resolved
        date = self.header or (self.anchor.text if self.anchor is not None else "")
        return f"[{date}] {said}" if with_date and date else said


def resolve_dates(sentence: str, anchor: tx.DateMention | None) -> str:
    if anchor is None:
        return sentence
    out = sentence
    for mention in reversed(tx.find_relative_dates(sentence)):
        meant = tx.resolve_relative(mention.text, anchor)
        if not meant:
            continue
        found = [d for d in tx.find_dates(meant) if d.start == 0]  # "the week before 8 May 2023" needs none
        preposition = "on " if found and found[0].day else ("in " if found or meant.isdigit() else "")
        out = out[: mention.start] + preposition + meant + out[mention.end:]
    return out


def statements(text: str) -> list[Statement]:
    """Every sentence of ``text`` with its speaker and date, in order."""
    out: list[Statement] = []
    anchor: tx.DateMention | None = None
    record: str | None = None
    record_dates: dict[str | None, tx.DateMention | None] = {}
    for line_no, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        if _SEPARATOR.match(line):
            record_dates[record] = anchor
            anchor = record = None
            continue
        turn = tx.parse_turn(line)
        label = turn.header if turn.date is None and _RECORD_LABEL.search(turn.header) else None
        if label is not None and label != record:
            # A model reading "[doc 5] ..." after "[doc 3] [8 May 2023]" does not date doc 5 by doc 3.
            record_dates[record] = anchor
            record, anchor = label, record_dates.get(label)
        inner = tx.parse_turn(turn.body) if turn.speaker else None
        if inner is not None and inner.speaker:
            # "Facts: Caroline: I went ...": a label over a remembered turn; the turn's speaker is who said it.
            turn = tx.SpeakerTurn(header=turn.header or inner.header, speaker=inner.speaker, body=inner.body,
                           date=turn.date or inner.date)
        line_dates = [d for d in tx.find_dates(line) if d.day and d.year]
        if turn.date is not None and turn.date.year:
            anchor = turn.date
        elif line_dates:
            anchor = line_dates[0]
        # Otherwise keep the previous anchor: lines under a session header inherit its date.
        if not turn.body or (turn.date is not None and not turn.speaker and _only_date(turn.body)):
            continue
        for sentence in tx.split_sentences(turn.body) or [turn.body]:
            out.append(Statement(len(out), line_no, sentence, turn.speaker, turn.header, anchor))
    return out


_LABEL_ONLY = re.compile(r"^\W*$")
_SEPARATOR = re.compile(r"^\s*(?:-{3,}|={3,}|\*{3,}|_{3,}|#{3,})\s*$")
# A record's label numbers it ("doc 5", "Record 2", "S3", "#4"); a name or a date in brackets is no record.
_RECORD_LABEL = re.compile(r"^(?:[A-Za-z]+[ _#:-]*)?#?\d{1,6}$")


def _only_date(body: str) -> bool:
    rest = body
    for d in reversed(tx.find_dates(body)):
        rest = rest[: d.start] + rest[d.end:]
    return bool(_LABEL_ONLY.match(rest))


def is_fact(statement: Statement) -> bool:
    """A statement a model would keep as a fact: not a question, and more than chatter."""
    return not statement.is_question and len(tx.content_words(statement.sentence)) >= MIN_FACT_WORDS


def informative(found: list[Statement], count: int) -> list[Statement]:
    """The ``count`` facts carrying the most rare content (names, numbers, dates count double), in text order:
    what an extractive summary of the text keeps."""
    facts = [s for s in found if is_fact(s)]
    if not facts:
        return found[:count]
    terms = [set(tx.content_stems(s.sentence)) for s in facts]
    idf = tx.idf_weights(terms)
    scored = []
    for s, t in zip(facts, terms):
        specific = len([n for n in tx.find_names(s.sentence) if not n.sentence_initial])
        specific += len(tx.find_numbers(s.sentence)) + len(tx.find_dates(s.sentence)) + len(
            tx.find_relative_dates(s.sentence))
        # sorted: float sums must not depend on set iteration order
        scored.append((sum(idf[w] for w in sorted(t)) + specific, -s.order, s))
    scored.sort(key=lambda r: (-r[0], -r[1]))
    return sorted((s for _, _, s in scored[:count]), key=lambda s: s.order)
