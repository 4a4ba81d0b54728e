"""HOSTILE: recurses without bound"""

from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str


def descend(n):
    return descend(n + 1) + 1


class KnowledgeBase:
    def __init__(self, toolkit):
        pass

    def write(self, item, raw_text):
        descend(0)

    def read(self, query):
        return ""
