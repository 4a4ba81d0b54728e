"""scripts/read_state_audit.py finds a program whose read() carries state to the next read, and passes one
whose reads change nothing: dynamically (contexts in item order against reversed order) and statically."""

from __future__ import annotations

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.results import EvalConcurrency
from mstar_ray.tasks.model import Item, RawText, Task
from scripts.read_state_audit import writes_in_read
from tests.conftest import seed_source

IN_ORDER = EvalConcurrency(in_flight=1, episodes=1, readers=1)  # reads in the program's process, as before
CARRIER = '''
from dataclasses import dataclass
INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text."
INSTRUCTION_QUERY = "Copy the question."
INSTRUCTION_RESPONSE = "Answer."
ALWAYS_ON_KNOWLEDGE = ""
@dataclass
class KnowledgeItem:
    text: str
@dataclass
class Query:
    text: str
class KnowledgeBase:
    def __init__(self, toolkit):
        self.notes = []
        self.asked = []
    def write(self, item, raw_text):
        self.notes.append(raw_text)
    def read(self, query):
        self.asked.append(query.text)
        return " ".join(self.notes) + " | asked before: " + " ; ".join(self.asked[:-1])
'''


def _contexts(source: str, task: Task, reverse: bool) -> dict[str, str]:
    items = list(reversed(task.items)) if reverse else None
    report = evaluate(source, task, OfflineBackend(), HashingEmbedder(), items=items, concurrency=IN_ORDER)
    assert report.violation is None
    return {r.id: r.context for r in report.results}


def test_reads_that_carry_state_are_told_apart_from_reads_that_do_not():
    task = Task(name="t", texts=[RawText(id="s1", text="Alice moved to Paris in May.")],
                items=[Item(id=f"q{i}", question=q, answer="Paris", category="1")
                       for i, q in enumerate(["Where did Alice move?", "When did Alice move?"])])
    assert _contexts(CARRIER, task, False) != _contexts(CARRIER, task, True)
    plain = seed_source("vector_search")
    assert _contexts(plain, task, False) == _contexts(plain, task, True)
    assert writes_in_read(CARRIER) == ["read:20 self.asked.append()"]
    assert writes_in_read(plain) == []
