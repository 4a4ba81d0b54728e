"""Seed: MemSkill (2026). Memory is built by a small library of memory operations ("skills"), one chosen for
each incoming item: EXTRACT stores the item as a new memory; CONSOLIDATE folds it into the stored memory it
elaborates (same speaker, similar content), so one memory gathers the details of one matter; PRUNE drops
what carries no information (small talk) and, when the store is full, the memory of least value (never
retrieved, then oldest). The chooser looks at two features of the item, its information (content words
outside small talk) and its novelty (similarity to the closest stored memory); ``SKILLS`` lists the library
with the rule that selects each skill, and how often each was chosen is logged.
CONSOLIDATE may spend the write's one LLM call to rewrite the merged memory; the rewrite is used only if it
keeps every number, date and name, otherwise the new sentence is appended.

A read ranks memories by the content words they share with the question (ties: most recently updated)
and counts each memory it returns, which is the value PRUNE keeps.

Left out, and why: MemSkill's controller is trained with PPO from downstream task rewards, and a designer
model rewrites skills from hard cases; a memory program cannot train, so the chooser is a fixed rule on the
two features above (the thresholds are module constants the search may tune), and designing skills is
what the search's reflector does to this file.
"""

import re
from dataclasses import dataclass, field

COMMIT_MESSAGE = "Seed (MemSkill): per-item choice among extract / consolidate / prune skills, by rules."

INSTRUCTION_KNOWLEDGE_ITEM = (
    "From this text, give who speaks, the date as written, the topic in a few words, and the new information "
    "it carries in one sentence (empty if it carries none, such as a greeting)."
)
INSTRUCTION_QUERY = "Restate the question with the names and topic it involves."
INSTRUCTION_RESPONSE = "Answer from the memories, which are kept per matter with their latest date. Be brief."
ALWAYS_ON_KNOWLEDGE = ""

MAX_CONTEXT_CHARS = 3000
MIN_INFORMATION = 2
CONSOLIDATE_SIMILARITY = 0.35
CANDIDATES = 200
CAPACITY = 5000
SHOWN = 8
MEMORY_CHARS = 900
SMALL_TALK = frozenset(
    "hey hi hello thanks thank good great awesome wow cool nice glad love sounds really yeah yes yep sure "
    "totally amazing see chat talk soon bye okay ok haha lol oh".split()
)
STOP = frozenset(
    "a an and are as at be but by did do does for from had has have he her him his how i in is it its me my "
    "of on or our she so that the their them they this to was we were what when where which who whom why "
    "will with would you your".split()
)
SKILLS = {
    "prune": "the item carries no information (fewer than MIN_INFORMATION content words outside small talk): drop it",
    "consolidate": "a stored memory of the same speaker is similar (CONSOLIDATE_SIMILARITY): fold the item into it",
    "extract": "otherwise: store the item as a new memory",
}


@dataclass
class KnowledgeItem:
    speaker: str = field(metadata={"description": "who speaks"})
    date: str = field(metadata={"description": "the date as written in the text"})
    topic: str = field(metadata={"description": "the topic in a few words"})
    information: str = field(metadata={"description": "the new information in one sentence, or empty"})


@dataclass
class Query:
    question: str = field(metadata={"description": "the question with the names and topic it involves"})


def terms(text):
    return {w for w in re.findall(r"[a-z0-9]+", (text or "").lower()) if w not in STOP and len(w) > 2}


def anchors_in(text):
    return set(re.findall(r"\b\d{1,4}\b|\b[A-Z][a-z]{2,}\b", text))


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.execute(
            "CREATE TABLE memory (id INTEGER PRIMARY KEY, speaker TEXT, topic TEXT, date TEXT, text TEXT, "
            "retrieved INTEGER, updated INTEGER)"
        )
        self.writes = 0
        self.chosen = {name: 0 for name in SKILLS}

    # -- the chooser and the skills --------------------------------------------------------------

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        text = (item.information or "").strip() or raw_text.strip()
        if not text:
            return
        self.writes += 1
        closest, similarity = self._closest(item.speaker or "", text)
        skill = self._choose(text, similarity)
        self.chosen[skill] += 1
        if skill == "consolidate":
            self._consolidate(closest, item, text)
        elif skill == "extract":
            self._extract(item, text)
        self._prune_to_capacity()
        self.db.commit()
        if self.writes % 100 == 0:
            self.toolkit.logger.debug(f"skills chosen after {self.writes} writes: {self.chosen}")

    def _choose(self, text, similarity):
        if len(terms(text) - SMALL_TALK) < MIN_INFORMATION:
            return "prune"
        if similarity >= CONSOLIDATE_SIMILARITY:
            return "consolidate"
        return "extract"

    def _closest(self, speaker, text):
        rows = self.db.execute(
            "SELECT id, text FROM memory WHERE speaker = ? ORDER BY updated DESC LIMIT ?", (speaker, CANDIDATES)
        ).fetchall()
        mine = terms(text)
        best, best_similarity = None, 0.0
        for memory_id, stored in rows:
            theirs = terms(stored)
            score = len(mine & theirs) / len(mine | theirs) if mine and theirs else 0.0
            if score > best_similarity:
                best, best_similarity = memory_id, score
        return best, best_similarity

    def _extract(self, item, text):
        self.db.execute(
            "INSERT INTO memory (speaker, topic, date, text, retrieved, updated) VALUES (?, ?, ?, ?, 0, ?)",
            (item.speaker or "", item.topic or "", item.date or "", text, self.writes),
        )

    def _consolidate(self, memory_id, item, text):
        (stored,) = self.db.execute("SELECT text FROM memory WHERE id = ?", (memory_id,)).fetchone()
        dated = f"({item.date}) {text}" if item.date else text
        merged = f"{stored} {dated}"
        prompt = f"{stored}\n{dated}\nCan you rewrite these as one memory, keeping every name, date and number?"
        try:
            rewrite = str(self.toolkit.llm_completion([{"role": "user", "content": prompt}])).strip()
            if rewrite and anchors_in(merged) <= anchors_in(rewrite):
                merged = rewrite
        except Exception as exc:
            self.toolkit.logger.debug(f"consolidation call failed ({exc}); appending")
        self.db.execute(
            "UPDATE memory SET text = ?, date = ?, updated = ? WHERE id = ?",
            (merged, item.date or "", self.writes, memory_id),
        )

    def _prune_to_capacity(self):
        (size,) = self.db.execute("SELECT COUNT(*) FROM memory").fetchone()
        if size > CAPACITY:
            self.db.execute(
                "DELETE FROM memory WHERE id = (SELECT id FROM memory ORDER BY retrieved, updated LIMIT 1)"
            )

    # -- read ------------------------------------------------------------------------------------

    def read(self, query: Query) -> str:
        wanted = terms(query.question)
        if not wanted:
            return ""
        rows = self.db.execute("SELECT id, speaker, date, text, updated FROM memory").fetchall()
        scored = []
        for memory_id, speaker, date, text, updated in rows:
            overlap = len(wanted & (terms(text) | terms(speaker)))
            if overlap:
                scored.append((overlap, updated, memory_id, speaker, date, text))
        scored.sort(reverse=True)
        lines = []
        for _, _, memory_id, speaker, date, text in scored[:SHOWN]:
            self.db.execute("UPDATE memory SET retrieved = retrieved + 1 WHERE id = ?", (memory_id,))
            lines.append(f"[{date}] {speaker}: {text[:MEMORY_CHARS]}")
        self.db.commit()
        return "\n".join(lines)[:MAX_CONTEXT_CHARS]
