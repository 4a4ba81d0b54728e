"""Seed: Vector Search. Raw text is chunked (at most 500 characters), stored in a Chroma collection and
the five chunks most similar to the query are returned, at most 3,000 characters, with no LLM call."""

from dataclasses import dataclass, field

COMMIT_MESSAGE = "Seed: vector search over raw-text chunks (top-5, no LLM in read)."

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Read the piece of conversation and fill the fields: who is speaking, when it was said, and a short "
    "summary of what was said. Keep names, dates and numbers exactly as written."
)
INSTRUCTION_QUERY = "Rewrite the question as a search query that would match the conversation turn holding the answer."
INSTRUCTION_RESPONSE = (
    "Answer the question using only the retrieved conversation excerpts. Give the shortest answer that is "
    "correct: a name, a date, a place or a short phrase."
)
ALWAYS_ON_KNOWLEDGE = ""

CHUNK_CHARS = 500
TOP_K = 5
MAX_CONTEXT_CHARS = 3000


@dataclass
class KnowledgeItem:
    speaker: str = field(metadata={"description": "who said it"})
    date: str = field(metadata={"description": "when it was said, as written in the text"})
    summary: str = field(metadata={"description": "one sentence saying what was said"})


@dataclass
class Query:
    query: str = field(metadata={"description": "a search query for the memory"})


def chunk(text, size):
    words = text.split()
    chunks, current = [], ""
    for word in words:
        if current and len(current) + 1 + len(word) > size:
            chunks.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        chunks.append(current[:size])
    return chunks


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.collection = toolkit.chroma.get_or_create_collection("memory")
        self.count = 0

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        pieces = chunk(raw_text, CHUNK_CHARS)
        if not pieces:
            return
        ids = [f"c{self.count + i}" for i in range(len(pieces))]
        self.count += len(pieces)
        self.collection.add(ids=ids, documents=pieces)

    def read(self, query: Query) -> str:
        if self.count == 0:
            return ""
        found = self.collection.query(query_texts=[query.query], n_results=min(TOP_K, self.count))
        docs = found["documents"][0]
        return "\n\n".join(docs)[:MAX_CONTEXT_CHARS]
