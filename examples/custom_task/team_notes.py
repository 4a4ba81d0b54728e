"""A task of your own, outside the package: a team's notes, and questions about them.

The run config names it (``task: {adapter: team_notes.py:TeamNotes, people: 8}``); mstar-ray imports this file
where the run starts, checks it, and ships it to every worker. It shows the two things an adapter can bring:

- the texts and the items (here generated; yours would read your files), with options of their own;
- a family (how one item is run with the memory and scored): one of the package's by name (``family = "qa"``),
  or, as here, a class of your own: ``ContainsAnswer`` asks the memory once, lets the agent answer from what it
  returned (its own step, ``ANSWER``: the prompt a model is sent, how its reply is read, and the rule the
  offline agent follows instead), and scores 1 when the answer holds the expected words, whatever else it says.

A file shipped by value must be self-contained: it may import mstar_ray and installed packages, not the files
beside it (put shared code in an installed package and name it ``adapter: my_package.module:Name`` instead).
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field

from mstar_ray.families.base import Overlap
from mstar_ray.families.qa.offline import answer as offline_answer
from mstar_ray.families.step import Shown, Step
from mstar_ray.results import ItemResult
from mstar_ray.tasks.model import RawText
from mstar_ray.families.qa.scoring import normalize_answer

PEOPLE = ["Ada", "Bruno", "Chen", "Dara", "Eli", "Farah", "Goran", "Hana", "Ivo", "Juno"]
# category -> (how a note says it, how it is asked, the values a person may have)
FACTS = {
    "city": ("{who} moved to {value} last spring.", "Which city did {who} move to?",
             ["Lisbon", "Oslo", "Quito", "Hanoi", "Dakar", "Perth", "Lima", "Turin", "Split", "Cork"]),
    "pet": ("{who} adopted a {value} from the shelter.", "What animal did {who} adopt?",
            ["beagle", "parrot", "tortoise", "ferret", "rabbit", "goldfish", "iguana", "hamster", "kitten", "pony"]),
    "instrument": ("On Fridays {who} practises the {value}.", "Which instrument does {who} practise?",
                   ["cello", "oboe", "banjo", "harp", "tuba", "violin", "sitar", "flute", "drums", "piano"]),
    "project": ("{who} leads the {value} project now.", "Which project does {who} lead?",
                ["Atlas", "Beacon", "Comet", "Delta", "Ember", "Falcon", "Garnet", "Harbor", "Iris", "Juniper"]),
}


def answer_prompt(shown: Shown, question: str) -> list[dict[str, str]]:
    """What a model is sent: the program's always-on knowledge, what memory returned, its instruction, the question."""
    memory = f"Memory:\n{shown.context}" if shown.context else "Memory: (empty)"
    parts = [shown.always_on.strip(), memory, shown.instruction, f"Question: {question}\nAnswer in a few words:"]
    return [{"role": "user", "content": "\n\n".join(part for part in parts if part)}]


def first_line(reply: str, question: str) -> str:
    return reply.strip().splitlines()[0] if reply.strip() else ""


# Offline (CI, tests, no model), the step takes the package's rule-based answerer, as the qa family's answer
# step does: a short span of the memory's sentence that best matches the question. A rule of your own works too:
# any function of (shown, question) that returns the answer.
ANSWER = Step("answer", prompt=answer_prompt, parse=first_line, offline=offline_answer, max_tokens=32)


class ContainsAnswer:
    """A family of its own (the Family protocol of mstar_ray.families.base), made with no arguments."""

    name = "contains-answer"
    steps = (ANSWER.name,)  # what it counts in run.calls: run.ask counts each step it runs
    overlap = Overlap(across_items=True)  # one read per item: items may run at once, their reads in item order
    brief = ("The agent answers each question from read()'s output alone; an answer scores 1 when it contains "
             "every word of the expected answer, else 0.")

    def metric_for(self, judged: bool) -> str:
        return "answer contained"

    def run(self, item, run):
        recall = run.memory.recall(item.question)
        result = ItemResult.of(item, query=recall.query, seconds=recall.seconds)
        if recall.error is not None:
            result.error = recall.error
            return result
        result.context = recall.context
        result.prediction = run.ask(ANSWER, recall.context, item.question)
        said = set(normalize_answer(result.prediction).split())
        result.score = float(set(normalize_answer(item.answer).split()) <= said)
        result.trace = f"expected words {'all' if result.score else 'not all'} in the answer"
        return result


class TeamNotes:
    """The adapter: ``family``, ``texts(options)`` and ``items(options)``; ``name`` and ``Options`` are optional."""

    name = "team-notes"
    family = ContainsAnswer

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")  # a key this task does not read is refused

        people: int = Field(8, ge=2, le=len(PEOPLE), description="how many people the notes are about")
        seed: int = Field(0, description="who has which city, pet, instrument and project")

    def _facts(self, options: Options) -> list[tuple[str, str, str]]:
        rng = random.Random(options.seed)
        facts = []
        for category, (_, _, values) in FACTS.items():
            for who, value in zip(PEOPLE[:options.people], rng.sample(values, options.people)):
                facts.append((who, category, value))
        return facts

    def texts(self, options: Options) -> list[RawText]:
        return [RawText(id=f"note-{who}-{category}", text=FACTS[category][0].format(who=who, value=value))
                for who, category, value in self._facts(options)]

    def items(self, options: Options) -> list[dict]:
        # dicts of Item's fields work as well as Item objects
        return [{"id": f"q-{who}-{category}", "question": FACTS[category][1].format(who=who), "answer": value,
                 "category": category, "evidence": [f"note-{who}-{category}"]}
                for who, category, value in self._facts(options)]
