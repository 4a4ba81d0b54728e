"""Admissible actions, for the actor step of both backends: the actions a text names, how well a phrase matches
an admissible action by its words, and the fixed exploration either backend falls back on when it has nothing
better (the offline one when memory suggests nothing, the LLM one when the model's reply names no action).

Actions are short imperative phrases ("take dirty teal dress", "go to cabinet 3"): their first word is the
verb, and two actions are alike when the verbs are equal and the other words overlap.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from mstar_ray import text as tx
from mstar_ray.families.episode.turn import Turn

# Clauses end at a transcript label, a line, a semicolon or a sentence; a label says what the clause is.
_BOUNDARY = re.compile(r"\b(ACTION|OBSERVATION|OBJECTIVE|OUTCOME|INVENTORY)\s*:|[\n;]|(?<=[.!?])\s+", re.IGNORECASE)
_LEAD = re.compile(r"^[\s\-*>\u2022\"'`(]*(?:\d{1,3}[.)]\s*)?")
# An unlabelled clause names an action only if it is this short (longer ones are sentences about something).
MAX_ACTION_WORDS = 10
# The fixed exploration: untried actions first; among them those that change the world, in this order of
# verbs, before any other verb, and looking last.
_EXPLORE_FIRST = ("take", "pick", "open", "go", "move", "put", "place", "insert", "cook", "slice", "chop", "dice",
                  "prepare", "eat", "heat", "cool", "clean", "use", "toggle")
_EXPLORE_LAST = ("examine", "read", "close", "drop", "look", "inventory", "help")


# Prepositions split an action's words into its slots: "put | dirty teal dress | in | laundry basket".
_SLOT_BREAKS = frozenset("in on into onto to from with at under inside".split())


def words(action: str) -> tuple[str, tuple[frozenset[str], ...]]:
    """(verb, the content words of each slot) of an action phrase."""
    tokens = tx.tokenize(action)
    if not tokens:
        return "", ()
    slots: list[set[str]] = [set()]
    for token in tokens[1:]:
        if token in _SLOT_BREAKS:
            slots.append(set())
        elif token not in tx.STOP_WORDS:
            slots[-1].add(token)
    return tokens[0], tuple(frozenset(slot) for slot in slots)


def _slot_overlaps(action: str, phrase: str) -> list[float] | None:
    """Each slot's Jaccard overlap (an empty slot matches an empty one); None unless the verbs are equal and the
    actions have as many slots."""
    verb_a, slots_a = words(action)
    verb_b, slots_b = words(phrase)
    if not verb_a or verb_a != verb_b or len(slots_a) != len(slots_b):
        return None
    return [len(a & b) / len(a | b) if a | b else 1.0 for a, b in zip(slots_a, slots_b)]


def similarity(action: str, phrase: str) -> float:
    """How alike two actions are: the geometric mean of their slots' overlaps (0 for another verb), so every slot
    must share a word: putting another object in the same container is not alike."""
    overlaps = _slot_overlaps(action, phrase)
    if not overlaps:
        return 0.0
    product = 1.0
    for overlap in overlaps:
        product *= overlap
    mean: float = product ** (1 / len(overlaps))
    return mean


def likeness(action: str, phrase: str) -> float:
    """A weaker kinship: the mean of the slots' overlaps, so that putting another object in the same container
    counts for something (which containers an episode like this one used)."""
    overlaps = _slot_overlaps(action, phrase)
    return sum(overlaps) / len(overlaps) if overlaps else 0.0


def named_actions(text: str, verbs: frozenset[str]) -> list[str]:
    """The action phrases ``text`` names, in order: every clause labelled ``ACTION:``, and every short unlabelled
    clause that starts with one of ``verbs`` (so notes such as "put dirty clothes in the laundry basket" count)."""
    found: list[str] = []
    label: str | None = None
    position = 0

    def take(clause: str) -> None:
        clause = _LEAD.sub("", clause).strip().rstrip(".!,\"'`)")
        if not clause:
            return
        tokens = tx.tokenize(clause)
        if label == "ACTION" or (label is None and tokens and tokens[0] in verbs and len(tokens) <= MAX_ACTION_WORDS):
            found.append(clause)

    for boundary in _BOUNDARY.finditer(text):
        take(text[position:boundary.start()])
        label = boundary.group(1).upper() if boundary.group(1) else None
        position = boundary.end()
    take(text[position:])
    return found


def match_reply(reply: str, actions: tuple[str, ...]) -> tuple[str | None, str]:
    """The admissible action a model's reply means, and how it was found: ``exact`` (its first line is one,
    ignoring case), ``named`` (the reply contains one: the longest), ``words`` (the most alike by words), or
    (None, ``none``)."""
    lines = [line for line in reply.splitlines() if line.strip()]
    first = re.sub(r"^\s*(?:action|next action|answer)\s*:\s*", "", lines[0] if lines else "", flags=re.IGNORECASE)
    first = _LEAD.sub("", first).strip().rstrip(".!\"'`").strip().lower()
    by_lower = {action.lower(): action for action in actions}
    if first in by_lower:
        return by_lower[first], "exact"
    low = reply.lower()
    contained = [action for action in actions if re.search(rf"(?<!\w){re.escape(action.lower())}(?!\w)", low)]
    if contained:
        return max(contained, key=lambda action: (len(action), action)), "named"
    # "You take the apple." names the action "take apple": a reply narrating it has a subject before its verb.
    phrase = re.sub(r"^(?:i|you|we)\s+(?:will\s+|would\s+|should\s+)?", "", first)
    best_score, best = 0.0, None
    for action in actions:  # ties go to the first
        score = similarity(action, phrase)
        if score > best_score:
            best_score, best = score, action
    return (best, "words") if best is not None else (None, "none")


def _verb_rank(action: str) -> int:
    verb = words(action)[0]
    if verb in _EXPLORE_FIRST:
        return _EXPLORE_FIRST.index(verb)
    if verb in _EXPLORE_LAST:
        return len(_EXPLORE_FIRST) + 1 + _EXPLORE_LAST.index(verb)
    return len(_EXPLORE_FIRST)


def explore(turn: Turn, hint: Callable[[str], float] | None = None) -> str:
    """The fixed exploration: the action taken least often so far, by verb order, then (given a ``hint``) the one
    it scores highest, then alphabetically."""
    taken = Counter(action for action, _ in turn.history)
    return min(turn.actions, key=lambda action: (taken[action], _verb_rank(action), -(hint(action) if hint else 0.0),
                                                 action))
