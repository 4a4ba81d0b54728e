"""Seed: Experience Learner. Each knowledge item is a lesson learned and a fact to remember, kept in
two lists; a read returns the lessons and the facts (most related first), with no LLM call."""

import re
from dataclasses import dataclass, field

COMMIT_MESSAGE = "Seed: keep lists of lessons and facts; read returns them, most related first."

INSTRUCTION_KNOWLEDGE_ITEM = (
    "From this experience, write one lesson learned (general, reusable) and one fact to remember "
    "(specific: who, what, when)."
)
INSTRUCTION_QUERY = "Name what the question is about."
INSTRUCTION_RESPONSE = "Use the lessons and facts to answer the question in as few words as possible."
ALWAYS_ON_KNOWLEDGE = "Facts may change over time: prefer the most recent fact when two disagree."

MAX_CONTEXT_CHARS = 3000


@dataclass
class KnowledgeItem:
    lesson: str = field(metadata={"description": "a general lesson learned from the experience"})
    fact: str = field(metadata={"description": "a specific fact to remember: who, what, when"})


@dataclass
class Query:
    topic: str = field(metadata={"description": "what the question is about"})


def words(text):
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class KnowledgeBase:
    def __init__(self, toolkit):
        self.lessons = []
        self.facts = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        if item.lesson and item.lesson not in self.lessons:
            self.lessons.append(item.lesson)
        self.facts.append(item.fact or raw_text)

    def read(self, query: Query) -> str:
        wanted = words(query.topic)
        facts = sorted(self.facts, key=lambda fact: -len(wanted & words(fact)))
        lessons = sorted(self.lessons, key=lambda lesson: -len(wanted & words(lesson)))[:5]
        text = "Lessons:\n" + "\n".join(lessons) + "\n\nFacts:\n" + "\n".join(facts)
        return text[:MAX_CONTEXT_CHARS]
