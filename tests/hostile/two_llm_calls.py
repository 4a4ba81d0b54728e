"""HOSTILE: makes two toolkit LLM calls in one read()"""

from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit

    def write(self, item, raw_text):
        pass

    def read(self, query):
        first = self.toolkit.llm_completion([{"role": "user", "content": "first?"}])
        try:
            second = self.toolkit.llm_completion([{"role": "user", "content": "second?"}])
        except Exception:
            second = "(refused, ignored)"
        return first + second
