"""Where the memory failed (MemSteer's attribution): for every item scored below 1 whose evidence is known,
whether its evidence reached ``read()``'s context and, if not, whether the memory still holds it.

- ``answering``: every evidence unit reached the context, and the answer is still wrong;
- ``retrieval``: evidence is missing from the context, but oracle reads bring all of it back (one ``read()``
  per missing unit, with a query the agent builds from that unit's own words): the memory holds it and the
  item's read did not find it;
- ``storage``: evidence that was written is missing and its oracle read does not bring it back: ``write``
  kept too little of it, or lost it, or ``read()`` cannot reach it whatever it is asked;
- ``not_written``: the missing evidence stands in texts this evaluation never wrote (the training subset left
  them out): the split's doing, not the program's.

Oracle reads run after every item has been run and scored, so attribution never changes a score, and they
go through the same agent steps (and so the run's limits, cache and ledger) as any read, under their own step
names. A program that breaks the contract in an oracle read stops the attribution, not the evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from mstar_ray import text as tx
from mstar_ray.families.base import Memory, MemoryViolation
from mstar_ray.results import ItemResult
from mstar_ray.tasks.model import Evidence, Item

Stage = Literal["answering", "retrieval", "storage", "not_written"]
STAGES: tuple[str, ...] = ("answering", "retrieval", "storage", "not_written")
ORACLE_CHARS = 1500  # of a missing unit's words, an oracle query is built from
ORACLE_UNITS = 4  # oracle reads per failed item at most (a multi-hop item cites a few units)

# "Reached the context" (measured against a hand-checked sample: docs/concepts/attribution.md): the unit's
# words, without its speaker, stand whole in the context; or most of its content words stand close together
# in it (a memory that rephrases, or keeps a fact's words without its filler); or one of its sentences of some
# substance does almost word for word (a memory that keeps the sentence that matters of a long turn). "Close
# together": within a stretch of the context twice as long as what is looked for, so that words scattered
# over a long context (another turn on the same topic) do not add up to the evidence. Where the item's answer
# stands in the unit, its words must reach the context too: a unit whose small talk came through without the
# name or number the question asks for did not bring what mattered.
WHOLE_SHARE = 0.6
SENTENCE_SHARE = 0.8
SENTENCE_MIN_WORDS = 4


def _words(text: str) -> list[str]:
    return [w.lower() for w in tx.tokenize(tx.fold_quotes(text))]


def _covered(wanted: set[str], stems: list[str], share: float) -> bool:
    """Whether some stretch of ``stems`` twice the length of ``wanted`` holds ``share`` of it."""
    if not wanted:
        return False
    need, width = share * len(wanted), max(2 * len(wanted), 8)
    for start in range(0, max(1, len(stems) - width + 1)):
        if len(wanted.intersection(stems[start:start + width])) >= need:
            return True
    return False


def reached(evidence: str, context: str, answer: str = "") -> bool:
    """Whether the evidence unit's text reached the context (see the rule above)."""
    turn = tx.parse_turn(evidence)
    body = turn.body if turn.speaker else evidence
    words = _words(body)
    if not words:
        return True  # nothing to look for: a unit of punctuation cannot be missing
    if " ".join(words) in " ".join(_words(context)):
        return True
    stems = tx.content_stems(context)
    if not (set(tx.content_stems(answer)) & set(tx.content_stems(body))) <= set(stems):
        return False
    if _covered(set(tx.content_stems(body)), stems, WHOLE_SHARE):
        return True
    for sentence in tx.split_sentences(body):
        terms = set(tx.content_stems(sentence))
        if len(terms) >= SENTENCE_MIN_WORDS and _covered(terms, stems, SENTENCE_SHARE):
            return True
    return False


def attribute(results: list[ItemResult], items: list[Item], evidence: Mapping[str, Evidence], memory: Memory) -> str | None:
    """Set ``stage`` and ``missing`` on every failed result whose item cites evidence; ``evidence`` holds the
    units of the texts that were written. Returns why attribution stopped early, if it did."""
    for result, item in zip(results, items):
        if result.score >= 1.0 or not item.evidence or result.error is not None:
            continue
        result.missing = [u for u in item.evidence
                          if u not in evidence or not reached(evidence[u].text, result.context, item.answer)]
        written = [u for u in result.missing if u in evidence]
        if not result.missing:
            result.stage = "answering"
            continue
        if not written:
            result.stage = "not_written"
            continue
        back = True
        for unit in written[:ORACLE_UNITS]:
            try:
                recall = memory.recall(evidence[unit].text[:ORACLE_CHARS], oracle=True)
            except MemoryViolation as exc:
                result.missing = []
                return f"the program broke the contract in an oracle read: [{exc.outcome.kind}] {exc.outcome.message[:300]}"
            if recall.error is not None or not reached(evidence[unit].text, recall.context, item.answer):
                back = False
                break
        result.stage = "retrieval" if back else "storage"
    return None

