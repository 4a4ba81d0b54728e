"""The respond step's offline stand-in: the context's passages most related to the conversation, as the reply.

A rule, not a writer: the reply holds only what memory returned. Passages (the context's blank-line separated
blocks) are ranked by the content words they share with the conversation, and the reply is their sentences in
order, best passage first, up to :data:`RESPONSE_SENTENCES`. A memory that recalls the advice given in a similar
past conversation, kept whole, gets a reply that covers more of the rubric; one that recalls nothing related gets
:data:`NOTHING`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mstar_ray import text as tx
from mstar_ray.families.step import Shown
from mstar_ray.families.rubric.conversations import Message

NOTHING = "I have nothing on this in memory."
RESPONSE_SENTENCES = 6
EARLIER_TURNS_WEIGHT = 0.5  # the conversation before its last user message says less about what is asked
_PASSAGE_BREAK = re.compile(r"\n\s*\n")
_LABEL = re.compile(r"^\s*[A-Z][a-z]+(?: [a-z]+){0,7}:(\s+|$)")  # "Ideal response: ...", "Facts:": a label, not content


def _sentences(passage: str) -> list[str]:
    found = []
    for sentence in tx.split_sentences(passage):
        while (unlabelled := _LABEL.sub("", sentence, count=1)) != sentence:
            sentence = unlabelled
        if sentence.strip():
            found.append(sentence.strip())
    return found


def respond(shown: Shown, messages: Sequence[Message]) -> str:
    combined = "\n".join(part for part in (shown.context or "", shown.always_on or "") if part.strip())
    return respond_from_context(combined, messages)


def respond_from_context(context: str, messages: Sequence[Message]) -> str:
    users = [m.content for m in messages if m.role == "user"]
    asked = set(tx.content_stems(users[-1] if users else ""))
    earlier = set(tx.content_stems(" ".join(m.content for m in messages))) - asked
    passages = [(p, set(tx.content_stems(p))) for p in _PASSAGE_BREAK.split(context) if p.strip()]
    if not passages or not asked:
        return NOTHING
    idf = tx.idf_weights(terms for _, terms in passages)
    ranked = []
    for order, (_, terms) in enumerate(passages):
        # sorted: float sums must not depend on set iteration order
        score = sum(idf[t] for t in sorted(terms & asked)) + EARLIER_TURNS_WEIGHT * sum(
            idf[t] for t in sorted(terms & earlier))
        if score > 0:
            ranked.append((score, order))
    ranked.sort(key=lambda r: (-r[0], r[1]))
    reply: list[str] = []
    for _, order in ranked:
        for sentence in _sentences(passages[order][0]):
            if sentence not in reply and len(reply) < RESPONSE_SENTENCES:
                reply.append(sentence)
    return " ".join(reply) or NOTHING
