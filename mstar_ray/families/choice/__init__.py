"""Multiple choice: an item is a question and its options; memory is asked from the question once, the agent
picks one option from what it returned, and the item scores 1 when that is the right one, else 0.

The whole family is this module: how an item runs with the memory (``run``), its one agent step (``CHOOSE``:
the prompt a model is sent, how its reply is read, and the offline agent's rule for the same), its metric and
its brief for the reflector. An item's ``spec`` holds its options (:class:`ChoiceSpec`); ``Item.answer`` is the
right option, word for word.
"""

from __future__ import annotations

import re
import string
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mstar_ray import text as tx
from mstar_ray.families.base import ItemRun, Overlap
from mstar_ray.families.step import Messages, Shown, Step
from mstar_ray.results import ItemResult
from mstar_ray.tasks.model import Item

LETTERS = string.ascii_uppercase
CHOOSE_MAX_TOKENS = 8  # a letter; room for "(B)" or "B." and a little more
# A reply that starts with an option's letter alone: "B", "B.", "(B) Lisbon", "B: Lisbon" (not "A dog ...").
_LETTER = re.compile(r"^\(?([A-Z])(?:\)|[.:]|$)")


class ChoiceSpec(BaseModel):
    """What the family reads from ``Item.spec``: the options, in the order they are shown."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    options: list[str] = Field(min_length=2, max_length=len(LETTERS))

    @field_validator("options")
    @classmethod
    def _distinct(cls, options: list[str]) -> list[str]:
        if any(not option.strip() for option in options):
            raise ValueError("an option is empty")
        if len({option.strip().lower() for option in options}) < len(options):
            raise ValueError("two options are the same")
        return options


class Asked(NamedTuple):
    question: str
    options: tuple[str, ...]


def choose_prompt(shown: Shown, asked: Asked) -> Messages:
    memory = f"Memory:\n{shown.context}" if shown.context else "Memory: (empty)"
    listed = "\n".join(f"{LETTERS[i]}. {option}" for i, option in enumerate(asked.options))
    parts = [shown.always_on.strip(), memory, shown.instruction, f"Question: {asked.question}\nOptions:\n{listed}",
             "Reply with the letter of one option."]
    return [{"role": "user", "content": "\n\n".join(part for part in parts if part)}]


def picked(reply: str, asked: Asked) -> str:
    """The option a reply names, by its letter or else by its whole text; "" when it names none, or several."""
    letter = _LETTER.match(reply.strip())
    if letter is not None and LETTERS.index(letter.group(1)) < len(asked.options):
        return asked.options[LETTERS.index(letter.group(1))]
    named = [option for option in asked.options if option.lower() in reply.lower()]
    return named[0] if len(named) == 1 else ""


def best_supported(shown: Shown, asked: Asked) -> str:
    """The offline agent's pick (a rule, not a model): the option a line of memory names beside the most of the
    question's other words, ties to the option listed first; the context first, the always-on knowledge only when
    the context names no option. None ("") when memory names no option: a guess would reward a memory that
    recalls nothing."""
    question = set(tx.content_stems(asked.question))
    for evidence in (shown.context, shown.always_on):
        sentences = [set(tx.content_stems(s)) for line in evidence.splitlines() for s in tx.split_sentences(line)]
        best, support = "", -1
        for option in asked.options:
            own = set(tx.content_stems(option)) - question  # words the question shares say nothing for one option
            found = [len(question & sentence) for sentence in sentences if own and own <= sentence]
            if found and max(found) > support:
                best, support = option, max(found)
        if best:
            return best
    return ""


CHOOSE = Step("choose", prompt=choose_prompt, parse=picked, offline=best_supported, max_tokens=CHOOSE_MAX_TOKENS)


def _labelled(option: str, options: list[str]) -> str:
    return f"{LETTERS[options.index(option)]} ({option})" if option in options else repr(option)


class MultipleChoice:
    name = "choice"
    steps = (CHOOSE.name,)
    overlap = Overlap(across_items=True)  # one read per item, at its start
    brief = ("Each item is a question with lettered options. The agent reads read()'s output, queried with the "
             "question, and picks one option; the item scores 1 when it is the right one, else 0. Memory holds "
             "the texts the questions are about.")

    def metric_for(self, judged: bool) -> str:
        return "accuracy (the right option picked)"  # an exact match: no judge takes part

    def run(self, item: Item, run: ItemRun) -> ItemResult:
        options = ChoiceSpec.model_validate(item.spec).options
        recall = run.memory.recall(item.question)
        result = ItemResult.of(item, query=recall.query, seconds=recall.seconds)
        if recall.error is not None:
            result.error = recall.error
            return result
        result.context = recall.context
        result.prediction = run.ask(CHOOSE, recall.context, Asked(item.question, tuple(options)))
        result.score = float(result.prediction == item.answer)
        chose = _labelled(result.prediction, options) if result.prediction else "no option"
        result.trace = f"picked {chose}; the right option is {_labelled(item.answer, options)}"
        return result
