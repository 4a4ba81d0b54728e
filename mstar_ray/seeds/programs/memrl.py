"""Seed: MemRL (2026). Each memory is an intent-experience-utility triple: the situation it serves (intent),
what was experienced (the text), and a utility Q, the estimated value of using it. Retrieval has two stages:
semantic candidates by intent similarity (only those above a relevance gate), then, among them, a score that
mixes the z-normalised similarity with the z-normalised utility, so a relevant memory that helped before
beats an equally relevant one that did not, and an irrelevant memory never enters however useful it was.

Utility learns from feedback: the optional ``feedback(query, score)`` is called by the protocol after an
answer is scored, on training questions only (never on the questions that give a program its fitness or its
test score). The memories that answer used get the Monte Carlo update Q <- Q + ALPHA * (score - Q). Without
feedback every Q stays at its prior and retrieval is by similarity alone.

Left out, and why: MemRL learns from environment rewards across many tasks and explores; here the reward is
the protocol's answer score on the few training questions it is given, there is no exploration bonus, and the
credit goes to every memory returned for that question (the paper discusses the same attribution problem).
No LLM call is made.
"""

import math
import re
from dataclasses import dataclass, field

COMMIT_MESSAGE = "Seed (MemRL): intent-experience-utility triples; similarity gate, then similarity + utility; Q from feedback."

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Describe this experience as a memory: the intent (what kind of question or situation it would help "
    "with) and the experience itself (what happened or was said, with who and when)."
)
INSTRUCTION_QUERY = "State the intent of the question: what situation or fact it asks about."
INSTRUCTION_RESPONSE = "Answer from the retrieved experiences, most useful first. Give the shortest correct answer."
ALWAYS_ON_KNOWLEDGE = ""

MAX_CONTEXT_CHARS = 3000
CANDIDATES = 20
SELECTED = 6
# Chroma's distance for all-MiniLM (squared L2 on unit vectors): 2 - 2 cos; above this, a memory is not relevant.
RELEVANCE_GATE = 1.6
UTILITY_WEIGHT = 0.5
ALPHA = 0.3
Q_PRIOR = 0.5
REMEMBERED_QUERIES = 256


@dataclass
class KnowledgeItem:
    intent: str = field(metadata={"description": "what kind of question or situation this memory helps with"})
    experience: str = field(metadata={"description": "the experience itself: the event or statement in full"})


@dataclass
class Query:
    intent: str = field(metadata={"description": "what situation or fact the question asks about"})


def zscores(values):
    if not values:
        return []
    mean = sum(values) / len(values)
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return [(v - mean) / spread if spread > 1e-9 else 0.0 for v in values]


def query_key(query):
    return re.sub(r"\s+", " ", (query.intent or "").strip().lower())


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.execute("CREATE TABLE triple (id INTEGER PRIMARY KEY, intent TEXT, experience TEXT, q REAL, uses INTEGER)")
        self.collection = toolkit.chroma.get_or_create_collection("intents")
        self.count = 0
        self.used = {}  # query key -> ids of the memories that answered it, for feedback

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        experience = raw_text.strip() or (item.experience or "").strip()
        if not experience:
            return
        intent = (item.intent or "").strip()
        self.count += 1
        self.db.execute("INSERT INTO triple VALUES (?, ?, ?, ?, 0)", (self.count, intent, experience, Q_PRIOR))
        self.db.commit()
        # The intent is what a question is matched against; the experience alone when there is no intent.
        key = f"{intent}\n{item.experience or experience}" if intent else experience
        self.collection.add(ids=[str(self.count)], documents=[key])

    def read(self, query: Query) -> str:
        if self.count == 0 or not (query.intent or "").strip():
            return ""
        found = self.collection.query(query_texts=[query.intent], n_results=min(CANDIDATES, self.count))
        pairs = [(int(i), d) for i, d in zip(found["ids"][0], found["distances"][0]) if d <= RELEVANCE_GATE]
        if not pairs:
            return ""
        rows = {row[0]: row for row in self._rows([i for i, _ in pairs])}
        pairs = [(i, d) for i, d in pairs if i in rows]
        similarity = zscores([-d for _, d in pairs])
        utility = zscores([rows[i][3] for i, _ in pairs])
        scored = [
            ((1 - UTILITY_WEIGHT) * s + UTILITY_WEIGHT * u, -i, i)
            for (i, _), s, u in zip(pairs, similarity, utility)
        ]
        chosen = [i for _, _, i in sorted(scored, reverse=True)[:SELECTED]]
        self._remember(query, chosen)
        parts, size = [], 0
        for memory_id in chosen:
            text = rows[memory_id][2]
            if size + len(text) > MAX_CONTEXT_CHARS:
                break
            parts.append(text)
            size += len(text) + 2
        return "\n\n".join(parts)

    def feedback(self, query: Query, score: float) -> None:
        """Monte Carlo update of the utility of every memory used for this query's answer."""
        chosen = self.used.pop(query_key(query), None)
        if not chosen:
            return
        reward = min(1.0, max(0.0, float(score)))
        for memory_id in chosen:
            self.db.execute("UPDATE triple SET q = q + ? * (? - q), uses = uses + 1 WHERE id = ?", (ALPHA, reward, memory_id))
        self.db.commit()

    def _rows(self, ids):
        marks = ",".join("?" * len(ids))
        return self.db.execute(f"SELECT id, intent, experience, q FROM triple WHERE id IN ({marks})", ids).fetchall()

    def _remember(self, query, chosen):
        if len(self.used) >= REMEMBERED_QUERIES:
            self.used.pop(next(iter(self.used)))
        self.used[query_key(query)] = chosen
