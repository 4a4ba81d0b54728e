"""HOSTILE: a class hierarchy shaped as a lattice (60 levels of two classes, each inheriting from both of the
level below): 2**60 paths from KnowledgeBase to the root classes, for a checker that walks paths."""


from dataclasses import dataclass, field
from typing import Optional

INSTRUCTION_KNOWLEDGE_ITEM = "extract"
INSTRUCTION_QUERY = "query"
INSTRUCTION_RESPONSE = "respond"
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str = field(metadata={"description": "what was said"})
    tags: list[str] = field(default_factory=list)
    when: Optional[str] = None
    score: float = 0.0


@dataclass
class Query:
    question: str
    filters: dict[str, int] | None = None


class L0a:
    pass


class L0b:
    pass


class L1a(L0a, L0b):
    pass


class L1b(L0a, L0b):
    pass


class L2a(L1a, L1b):
    pass


class L2b(L1a, L1b):
    pass


class L3a(L2a, L2b):
    pass


class L3b(L2a, L2b):
    pass


class L4a(L3a, L3b):
    pass


class L4b(L3a, L3b):
    pass


class L5a(L4a, L4b):
    pass


class L5b(L4a, L4b):
    pass


class L6a(L5a, L5b):
    pass


class L6b(L5a, L5b):
    pass


class L7a(L6a, L6b):
    pass


class L7b(L6a, L6b):
    pass


class L8a(L7a, L7b):
    pass


class L8b(L7a, L7b):
    pass


class L9a(L8a, L8b):
    pass


class L9b(L8a, L8b):
    pass


class L10a(L9a, L9b):
    pass


class L10b(L9a, L9b):
    pass


class L11a(L10a, L10b):
    pass


class L11b(L10a, L10b):
    pass


class L12a(L11a, L11b):
    pass


class L12b(L11a, L11b):
    pass


class L13a(L12a, L12b):
    pass


class L13b(L12a, L12b):
    pass


class L14a(L13a, L13b):
    pass


class L14b(L13a, L13b):
    pass


class L15a(L14a, L14b):
    pass


class L15b(L14a, L14b):
    pass


class L16a(L15a, L15b):
    pass


class L16b(L15a, L15b):
    pass


class L17a(L16a, L16b):
    pass


class L17b(L16a, L16b):
    pass


class L18a(L17a, L17b):
    pass


class L18b(L17a, L17b):
    pass


class L19a(L18a, L18b):
    pass


class L19b(L18a, L18b):
    pass


class L20a(L19a, L19b):
    pass


class L20b(L19a, L19b):
    pass


class L21a(L20a, L20b):
    pass


class L21b(L20a, L20b):
    pass


class L22a(L21a, L21b):
    pass


class L22b(L21a, L21b):
    pass


class L23a(L22a, L22b):
    pass


class L23b(L22a, L22b):
    pass


class L24a(L23a, L23b):
    pass


class L24b(L23a, L23b):
    pass


class L25a(L24a, L24b):
    pass


class L25b(L24a, L24b):
    pass


class L26a(L25a, L25b):
    pass


class L26b(L25a, L25b):
    pass


class L27a(L26a, L26b):
    pass


class L27b(L26a, L26b):
    pass


class L28a(L27a, L27b):
    pass


class L28b(L27a, L27b):
    pass


class L29a(L28a, L28b):
    pass


class L29b(L28a, L28b):
    pass


class L30a(L29a, L29b):
    pass


class L30b(L29a, L29b):
    pass


class L31a(L30a, L30b):
    pass


class L31b(L30a, L30b):
    pass


class L32a(L31a, L31b):
    pass


class L32b(L31a, L31b):
    pass


class L33a(L32a, L32b):
    pass


class L33b(L32a, L32b):
    pass


class L34a(L33a, L33b):
    pass


class L34b(L33a, L33b):
    pass


class L35a(L34a, L34b):
    pass


class L35b(L34a, L34b):
    pass


class L36a(L35a, L35b):
    pass


class L36b(L35a, L35b):
    pass


class L37a(L36a, L36b):
    pass


class L37b(L36a, L36b):
    pass


class L38a(L37a, L37b):
    pass


class L38b(L37a, L37b):
    pass


class L39a(L38a, L38b):
    pass


class L39b(L38a, L38b):
    pass


class L40a(L39a, L39b):
    pass


class L40b(L39a, L39b):
    pass


class L41a(L40a, L40b):
    pass


class L41b(L40a, L40b):
    pass


class L42a(L41a, L41b):
    pass


class L42b(L41a, L41b):
    pass


class L43a(L42a, L42b):
    pass


class L43b(L42a, L42b):
    pass


class L44a(L43a, L43b):
    pass


class L44b(L43a, L43b):
    pass


class L45a(L44a, L44b):
    pass


class L45b(L44a, L44b):
    pass


class L46a(L45a, L45b):
    pass


class L46b(L45a, L45b):
    pass


class L47a(L46a, L46b):
    pass


class L47b(L46a, L46b):
    pass


class L48a(L47a, L47b):
    pass


class L48b(L47a, L47b):
    pass


class L49a(L48a, L48b):
    pass


class L49b(L48a, L48b):
    pass


class L50a(L49a, L49b):
    pass


class L50b(L49a, L49b):
    pass


class L51a(L50a, L50b):
    pass


class L51b(L50a, L50b):
    pass


class L52a(L51a, L51b):
    pass


class L52b(L51a, L51b):
    pass


class L53a(L52a, L52b):
    pass


class L53b(L52a, L52b):
    pass


class L54a(L53a, L53b):
    pass


class L54b(L53a, L53b):
    pass


class L55a(L54a, L54b):
    pass


class L55b(L54a, L54b):
    pass


class L56a(L55a, L55b):
    pass


class L56b(L55a, L55b):
    pass


class L57a(L56a, L56b):
    pass


class L57b(L56a, L56b):
    pass


class L58a(L57a, L57b):
    pass


class L58b(L57a, L57b):
    pass


class L59a(L58a, L58b):
    pass


class L59b(L58a, L58b):
    pass


class KnowledgeBase(L59a, L59b):
    def __init__(self, toolkit):
        self.items = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.items.append(item)

    def read(self, query: Query) -> str:
        return ""
