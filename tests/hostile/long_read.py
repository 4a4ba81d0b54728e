"""HOSTILE: returns 10,000 characters from read()"""

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
        pass

    def write(self, item, raw_text):
        pass

    def read(self, query):
        return "x" * 10000
