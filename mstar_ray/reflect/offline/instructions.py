"""``edit_instruction``: add or drop one generic guidance sentence in an instruction constant.
"""

from __future__ import annotations

import ast
import json
import random
import re
from collections.abc import Collection

from mstar_ray.contract import REQUIRED_CONSTANTS
from mstar_ray.reflect.offline.engine import (
    _LINE_WIDTH, _Edit, Mutation, NoMutation, _Source, _apply, _bindings, _valid,
)


GUIDANCE: dict[str, tuple[str, ...]] = {
    "INSTRUCTION_KNOWLEDGE_ITEM": (
        "Keep names, dates and numbers exactly as written.",
        "Record who said it and when.",
        "Prefer concrete facts (people, places, events, possessions) over small talk.",
        "When the text reports a change (a new job, home, car or hobby), record the new value.",
        "Resolve relative dates such as 'yesterday' or 'last week' against the date of the text.",
        "Leave a field empty rather than guessing.",
    ),
    "INSTRUCTION_QUERY": (
        "Keep the names and dates from the question.",
        "Include the key nouns of the question, not only its topic.",
        "Add likely synonyms for the thing asked about (for example 'job' for 'work').",
        "For a question about the present, ask for the most recent information.",
        "Do not answer the question; only say what to look up.",
    ),
    "INSTRUCTION_RESPONSE": (
        "Answer with a short phrase taken from the context where possible.",
        "When two facts disagree, trust the most recent one.",
        "For a 'when' question, give the date as written, with day, month and year.",
        "Do not repeat the question in the answer.",
        "If the context does not hold the answer, say you don't know.",
    ),
    "ALWAYS_ON_KNOWLEDGE": (
        "Facts may change over time: prefer the most recent fact when two disagree.",
        "Relative dates ('yesterday', 'last week') count from the date of the message they appear in.",
        "A person described rather than named (an owner, a cousin) can be identified in one excerpt and "
        "looked up in another.",
    ),
}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z'\"(])")


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


def _string_literal(head: str, value: str) -> str:
    """``value`` as Python source after ``head`` ("NAME = "): one line if it fits, else a wrapped concatenation."""
    one_line = json.dumps(value, ensure_ascii=False)
    if len(head) + len(one_line) <= _LINE_WIDTH:
        return one_line
    pieces = [""]
    for word in re.findall(r"\S+\s*", value):
        if pieces[-1] and len(pieces[-1]) + len(word) > _LINE_WIDTH - 8:
            pieces.append("")
        pieces[-1] += word
    inner = "".join(f"    {json.dumps(p, ensure_ascii=False)}\n" for p in pieces)
    return f"(\n{inner})"


def _instruction_edits(value: str, name: str) -> list[tuple[str, str]]:
    """(new value, description) for every one-sentence addition or removal."""
    present = _sentences(value)
    options = []
    for sentence in GUIDANCE[name]:
        if sentence not in value:
            joined = f"{value.rstrip()} {sentence}" if value.strip() else sentence
            options.append((joined, f"reword {name}: add \"{sentence}\""))
    # Drop a sentence only while one remains; the always-on text may become empty.
    if len(present) > 1 or (name == "ALWAYS_ON_KNOWLEDGE" and present):
        for i, sentence in enumerate(present):
            rest = " ".join(present[:i] + present[i + 1 :])
            options.append((rest, f"reword {name}: drop \"{sentence}\""))
    return options


def edit_instruction(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Add one generic guidance sentence (from ``GUIDANCE``) to an instruction constant, or drop one.

    The constant's statement is rewritten in place, on one line if it fits, else as a parenthesised
    concatenation. Offline, edits of the three INSTRUCTION_* constants cannot change a score:
    ``OfflineBackend`` accepts them but its rules ignore them. ``ALWAYS_ON_KNOWLEDGE`` edits can: its
    text joins the retrieved context when the offline agent answers, so each sentence is one more
    candidate answer (usually a distractor; the retrieved context wins ties). With an LLM task agent
    all four matter.
    """
    parsed = _Source(source)
    statements = _bindings(parsed.tree)
    names = [n for n in REQUIRED_CONSTANTS if isinstance(getattr(statements.get(n), "value", None), ast.Constant)]
    rng.shuffle(names)
    for name in names:
        stmt = statements[name]
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or not isinstance(stmt.value, ast.Constant) \
                or not isinstance(stmt.value.value, str):
            continue  # an augmented assignment (``X += ...``) or a non-text value: no instruction to rewrite
        options = _instruction_edits(stmt.value.value, name)
        rng.shuffle(options)
        for value, description in options:
            target = stmt.annotation if isinstance(stmt, ast.AnnAssign) else stmt.targets[-1]
            start, head_end = parsed.span(stmt)[0], parsed.span(target)[1]
            head = parsed.text[start:head_end] + " = "
            child = _apply(source, [_Edit(start, parsed.span(stmt)[1], head + _string_literal(head, value))])
            if _valid(source, child, avoid):
                return Mutation("edit_instruction", description, child)
    raise NoMutation("no instruction constant to edit")
