"""HOSTILE: an infinite loop in write()"""

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
        while True:
            pass

    def read(self, query):
        return ""
