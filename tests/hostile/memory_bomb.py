"""HOSTILE: allocates memory until something gives"""

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
        self.hoard = []

    def write(self, item, raw_text):
        while True:
            self.hoard.append(bytearray(50 * 1024 * 1024))

    def read(self, query):
        return ""
