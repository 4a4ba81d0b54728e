"""Seed: LLM Summarizer. Raw text is stored as it is; a read makes one LLM call that summarises the
stored text for the query, and falls back to the most recent raw text if that call fails.

Version 2: each stored text gives the summarising call at most ``MAX_TEXT_CHARS`` (its header and the lines
sharing the most words with the request, in their order), so one long session no longer ends the material
(version 1 stopped at the first text over the budget, and LoCoMo sessions run to 6,500 characters)."""

import re
from dataclasses import dataclass, field

COMMIT_MESSAGE = "Seed: store raw text in SQLite; read = one LLM call summarising it for the query."

INSTRUCTION_KNOWLEDGE_ITEM = "Read the text and note its main topic in a few words."
INSTRUCTION_QUERY = "Restate the question as a precise request for the facts needed to answer it."
INSTRUCTION_RESPONSE = "Answer the question from the summary of memory. Be brief: a few words are best."
ALWAYS_ON_KNOWLEDGE = ""

MAX_CONTEXT_CHARS = 3000
# What one summarising call may read: the stored texts sharing the most words with the request.
MAX_SOURCE_CHARS = 6000
# Of one stored text, at most this much goes into the call: several texts always fit.
MAX_TEXT_CHARS = 2000


@dataclass
class KnowledgeItem:
    topic: str = field(metadata={"description": "the main topic of the text in a few words"})


@dataclass
class Query:
    request: str = field(metadata={"description": "the facts that memory should provide"})


def words(text):
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def excerpt(body, wanted, size):
    """The text whole if it fits in ``size``; else its [date] header and its lines sharing the most words
    with the request, as many as fit, in their original order."""
    if len(body) <= size:
        return body
    lines = body.split("\n")
    header = lines[0] if lines[0].startswith("[") else ""
    rest = lines[1:] if header else lines
    ranked = sorted(range(len(rest)), key=lambda i: -len(wanted & words(rest[i])))
    chosen, used = [], len(header)
    for i in ranked:
        if used + len(rest[i]) + 1 <= size:
            chosen.append(i)
            used += len(rest[i]) + 1
    kept = [rest[i] for i in sorted(chosen)]
    return "\n".join([header] + kept if header else kept)


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.execute("CREATE TABLE IF NOT EXISTS texts (id INTEGER PRIMARY KEY, topic TEXT, body TEXT)")

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.db.execute("INSERT INTO texts (topic, body) VALUES (?, ?)", (item.topic, raw_text))
        self.db.commit()

    def read(self, query: Query) -> str:
        rows = self.db.execute("SELECT topic, body FROM texts ORDER BY id").fetchall()
        if not rows:
            return ""
        wanted = words(query.request)
        ranked = sorted(rows, key=lambda row: -len(wanted & words(row[0] + " " + row[1])))
        source, size = [], 0
        for _, body in ranked:
            part = excerpt(body, wanted, min(MAX_TEXT_CHARS, MAX_SOURCE_CHARS - size))
            if size + len(part) > MAX_SOURCE_CHARS:
                break
            source.append(part)
            size += len(part) + 1
        material = "\n".join(source)
        prompt = (
            f"Request: {query.request}?\n\n"
            "Summarise the notes below, keeping only what serves the request. Keep names and dates.\n\n"
            f"{material}"
        )
        try:
            summary = self.toolkit.llm_completion([{"role": "user", "content": prompt}])
        except Exception as exc:
            self.toolkit.logger.debug(f"summary failed, falling back to raw text: {exc}")
            summary = material
        return summary[:MAX_CONTEXT_CHARS]
