"""Seed: Vector Search. Raw text is chunked (at most 500 characters), stored in a Chroma collection and
the five chunks most similar to the query are returned, at most 3,000 characters, with no LLM call.

Version 2: chunks are cut at line ends, and each carries its text's [date] header (and each piece of a line
too long for one chunk its speaker), so that a chunk cut from the middle of a session still says when and
who (version 1 cut at any word, and only a session's first chunk had its date)."""

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


def pieces(line, size):
    """A line cut at words into pieces of at most ``size``; each later piece keeps the line's "Name: " label."""
    label = line.split(": ", 1)[0] + ": " if ": " in line[:40] else ""
    out, current = [], ""
    for word in line.split():
        if current and len(current) + 1 + len(word) > size:
            out.append(current)
            current = label + word
        else:
            current = f"{current} {word}" if current else word
    if current:
        out.append(current[:size])
    return out


def chunk(text, size):
    """Whole lines grouped into chunks of at most ``size``, each opening with the text's [date] header."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    header = lines.pop(0) if lines and lines[0].startswith("[") and lines[0].endswith("]") else ""
    room = max(size - len(header) - 1, size // 2)
    chunks, current = [], []
    for line in lines:
        for piece in pieces(line, room):
            if current and len("\n".join(current + [piece])) > room:
                chunks.append(current)
                current = []
            current.append(piece)
    if current:
        chunks.append(current)
    if not chunks and header:
        return [header]
    return [(header + "\n" if header else "") + "\n".join(c) for c in chunks]


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
