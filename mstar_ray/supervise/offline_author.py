"""The offline author: template plans over what the offline agent's text rules find in a piece (its date, a
name, a place, a number, a quoted title), with no model. It lets the whole supervision path run, and be
tested, without a network; its questions are templates (``When did X say "..."?``, a sentence with a blank),
nothing like a model's, and everything made with it says so (``LABEL``). It goes through the same checks as a
model's replies: its replies are JSON text like a model's.
"""

from __future__ import annotations

import json
import random
import re

from mstar_ray import text as tx
from mstar_ray.families.qa.offline import IDK, answer_from_context
from mstar_ray.supervise.bundles import Bundle, Piece
from mstar_ray.supervise.plan import AnswerPlan

LABEL = "offline templates (no model: a stand-in for tests and CI, not real supervision)"
BLANK = "___"
MIN_WORDS = 4
_TITLE = re.compile(r"\"([^\"]{3,60})\"")


def _body(piece: Piece) -> tuple[str, str]:
    turn = tx.parse_turn(piece.text)
    return (turn.speaker or "someone"), (turn.body if turn.speaker else piece.text)


def _sentences(piece: Piece) -> list[str]:
    _, body = _body(piece)
    body = re.sub(r"\s*\[shares an image:[^\]]*\]", "", body)
    return [s for s in tx.split_sentences(body) if len(tx.content_words(s)) >= MIN_WORDS and len(s) <= 220]


def _entity(sentence: str, speaker: str) -> tuple[str, str] | None:
    """(the entity, its type) a cloze question can blank out of the sentence."""
    title = _TITLE.search(sentence)
    if title:
        return title.group(1), "entity"
    names = [n.text for n in tx.find_names(sentence) if not n.sentence_initial and n.text != speaker]
    if names:
        return names[0], "entity"
    places = tx.find_places(sentence)
    if places:
        return places[0], "entity"
    numbers = tx.find_numbers(sentence)
    return (numbers[0], "number") if numbers else None


class OfflineAuthor:
    name = LABEL

    def plan(self, bundle: Bundle) -> str:
        rng = random.Random("plan:" + ",".join(p.id for p in bundle.pieces))
        options: dict[str, list[tuple[Piece, str, str]]] = {}  # by the answer's type
        for piece in bundle.pieces:
            speaker, _ = _body(piece)
            for sentence in _sentences(piece):
                found = _entity(sentence, speaker)
                if found is not None:
                    options.setdefault(found[1], []).append((piece, sentence, found[0]))
                if piece.date:
                    options.setdefault("date", []).append((piece, sentence, piece.date))
        if not options:
            return "no fact to plan from"  # not JSON: rejected and counted like a model's unusable reply
        kind = rng.choice(sorted(options))  # a type first, so dates (every dated piece has one) do not crowd out the rest
        piece, sentence, answer = rng.choice(options[kind])
        return json.dumps({"topic": sentence[:60], "facts": [{"piece": piece.id, "quote": sentence}],
                           "operation": "single", "answer": answer, "answer_type": kind})

    def question(self, plan: AnswerPlan, bundle: Bundle) -> str:
        fact = plan.facts[0]
        piece = bundle.get(fact.piece)
        speaker, _ = _body(piece) if piece is not None else ("someone", "")
        quote = fact.quote.rstrip(".!?")
        if plan.answer_type == "date":
            return json.dumps({"question": f'When did {speaker} say "{quote}"?'})
        blanked = re.sub(re.escape(plan.answer), BLANK, quote, count=1)
        return json.dumps({"question": f'{speaker} said: "{blanked}". What is the missing part?'})

    def verify(self, question: str, answer_type: str, cited: list[Piece]) -> str:
        """The blind reader: only the question, the answer type and the cited pieces."""
        answer = _fill_blank(question, cited) if BLANK in question else None
        if answer is None:
            context = "\n".join(f"[{p.date}] {p.text}" if p.date else p.text for p in cited)
            answer = answer_from_context(context, question)
        if not answer or answer == IDK:
            return json.dumps({"answerable": False, "answer": "", "citations": []})
        key = answer.casefold()
        citations = [p.id for p in cited if key in p.text.casefold() or key in p.date.casefold()]
        return json.dumps({"answerable": True, "answer": answer, "citations": citations})


def _fill_blank(question: str, cited: list[Piece]) -> str | None:
    """The words that fill the question's blank in a cited sentence that has the same words around it."""
    inside = re.search(r'"(.*)"', question)
    if inside is None:
        return None
    before, _, after = (part.strip() for part in inside.group(1).partition(BLANK))
    # The blank runs to the words after it, or, when it ends the sentence, to the sentence's end.
    tail = re.escape(after) + r"(?=$|[\s.!?,])" if after else r"(?=[.!?,]|$)"
    pattern = re.compile(re.escape(before) + r"\s*(.+?)\s*" + tail, re.IGNORECASE)
    for piece in cited:
        match = pattern.search(" ".join(piece.text.split()))
        if match:
            return match.group(1)
    return None
