"""Seed: Grounding Agent Memory (2026): propose, probe, then commit. Each write is a proposal (a claim, its
scope, its date) that is checked before anything is stored. Two read-only probes: against the source (is
every content word of the claim in the text it came from? if not, the claim is narrowed to the sentences of
the source that support it) and against the store (memories of the same scope: is this a duplicate, or does
it change what a stored memory says?). The source probe may NARROW the claim; the store probe then decides
to COMMIT a new memory, REVISE a stored one (its claim replaced, the old claim kept in its history) or SKIP a
duplicate (the memory it repeats counts one more source). Clear cases are decided by rule; when the store
probe finds a memory of the same scope that overlaps the proposal without repeating it, the write spends its
one LLM call on the decision, and a reply that is not one of the labels leaves it to the rule (commit).

A read ranks committed memories by the content words they share with the question (ties: latest first) and
shows each with its date, scope, verification and, for revised ones, what they said before.

Left out, and why: the paper's curator probes the live environment (files, schemas, workbooks) with
read-only tools in several steps; a memory program has no environment but its own store and the text being
written, so those are what it probes, in one pass, with at most the one LLM call.
"""

import re
from dataclasses import dataclass, field

COMMIT_MESSAGE = "Seed (Grounding): propose, probe source and store, then commit/revise/narrow/skip."

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Propose one memory from this text: the claim (a fact stated in the text, in one sentence), its scope "
    "(the person or thing it is about) and the date it holds from, as written. Claim only what the text says."
)
INSTRUCTION_QUERY = "Name the person or thing the question is about and restate what is asked."
INSTRUCTION_RESPONSE = (
    "Answer from the verified memories; a revised memory shows what it said before, and the latest claim "
    "holds now. Give the shortest correct answer."
)
ALWAYS_ON_KNOWLEDGE = ""

MAX_CONTEXT_CHARS = 3000
SHOWN = 10
DUPLICATE_SIMILARITY = 0.75
# Below this overlap with the closest memory of its scope, a proposal is simply new: no LLM call.
AMBIGUOUS_SIMILARITY = 0.3
SAME_SCOPE_CANDIDATES = 30
GROUNDED_SHARE = 0.8
HISTORY_SHOWN = 1
LABELS = ("COMMIT", "REVISE", "SKIP")
STOP = frozenset(
    "a an and are as at be but by did do does for from had has have he her him his how i in is it its me my "
    "of on or our she so that the their them they this to was we were what when where which who whom why "
    "will with would you your".split()
)


@dataclass
class KnowledgeItem:
    claim: str = field(metadata={"description": "one fact the text states, in one sentence"})
    scope: str = field(metadata={"description": "the person or thing the claim is about"})
    date: str = field(metadata={"description": "the date the claim holds from, as written in the text"})


@dataclass
class Query:
    scope: str = field(metadata={"description": "the person or thing the question is about"})
    question: str = field(metadata={"description": "what is asked, in full"})


def terms(text):
    return {w for w in re.findall(r"[a-z0-9]+", (text or "").lower()) if w not in STOP and len(w) > 1}


def similarity(a, b):
    a, b = terms(a), terms(b)
    return len(a & b) / len(a | b) if a and b else 0.0


def sentences(text):
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.execute(
            "CREATE TABLE memory (id INTEGER PRIMARY KEY, scope TEXT, claim TEXT, date TEXT, source TEXT, "
            "verification TEXT, history TEXT, sources INTEGER, updated INTEGER)"
        )
        self.count = 0
        self.writes = 0

    # -- propose, probe, commit -----------------------------------------------------------------

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        source = raw_text.strip()
        claim = (item.claim or "").strip() or source
        if not claim:
            return
        self.writes += 1
        claim, verification = self._probe_source(claim, source)
        scope = (item.scope or "").strip()
        decision, target = self._decide(claim, scope, source)
        if decision == "SKIP":
            self.db.execute("UPDATE memory SET sources = sources + 1 WHERE id = ?", (target[0],))
        elif decision == "REVISE":
            history = (target[3] + "\n" if target[3] else "") + f"[{target[4]}] {target[2]}"
            self.db.execute(
                "UPDATE memory SET claim = ?, date = ?, source = ?, verification = ?, history = ?, updated = ? "
                "WHERE id = ?",
                (claim, item.date or "", source, verification, history, self.writes, target[0]),
            )
        else:
            self.count += 1
            self.db.execute(
                "INSERT INTO memory VALUES (?, ?, ?, ?, ?, ?, '', 1, ?)",
                (self.count, scope, claim, item.date or "", source, verification, self.writes),
            )
        self.db.commit()

    def _probe_source(self, claim, source):
        """A claim whose words are in its source is verified; otherwise it is narrowed to the source's
        sentences that share words with it (or to the whole source when none does)."""
        claimed = terms(claim)
        if not source or not claimed or len(claimed & terms(source)) >= GROUNDED_SHARE * len(claimed):
            return claim, "verified against its source"
        supporting = [s for s in sentences(source) if terms(s) & claimed]
        return (" ".join(supporting) or source), "narrowed to what its source says"

    def _decide(self, claim, scope, source):
        rows = self.db.execute(
            "SELECT id, scope, claim, history, date FROM memory WHERE scope = ? ORDER BY updated DESC LIMIT ?",
            (scope, SAME_SCOPE_CANDIDATES),
        ).fetchall() if scope else []
        best, best_similarity = None, 0.0
        for row in rows:
            score = similarity(claim, row[2])
            if score > best_similarity:
                best, best_similarity = row, score
        if best is None:
            return "COMMIT", None
        if best_similarity >= DUPLICATE_SIMILARITY:
            return "SKIP", best
        verdict = self._ask(best[2], claim, source) if best_similarity >= AMBIGUOUS_SIMILARITY else None
        return (verdict, best) if verdict in ("REVISE", "SKIP") else ("COMMIT", None)

    def _ask(self, stored, proposed, source):
        prompt = (
            f"Stored: {stored}\nProposed: {proposed}\nSource: {source[:600]}\n"
            "Same subject. Should the proposed memory be committed as new (COMMIT), replace the stored one because "
            "it changed (REVISE), or be skipped as already known (SKIP)? Reply with one word."
        )
        try:
            reply = str(self.toolkit.llm_completion([{"role": "user", "content": prompt}]))
        except Exception as exc:
            self.toolkit.logger.debug(f"decision call failed ({exc}); committing by rule")
            return None
        first = re.findall(r"[A-Za-z]+", reply)
        return first[0].upper() if first and first[0].upper() in LABELS else None

    # -- read ------------------------------------------------------------------------------------

    def read(self, query: Query) -> str:
        wanted = terms(f"{query.scope} {query.question}")
        if self.count == 0 or not wanted:
            return ""
        rows = self.db.execute(
            "SELECT scope, claim, date, source, verification, history, sources, updated FROM memory"
        ).fetchall()
        scored = []
        for row in rows:
            overlap = len(wanted & (terms(row[0]) | terms(row[1]) | terms(row[3])))
            if overlap:
                scored.append((overlap, row[7], row))
        scored.sort(key=lambda s: (-s[0], -s[1]))
        parts = []
        for _, _, (scope, claim, date, source, verification, history, seen, _) in scored[:SHOWN]:
            line = f"[{date}] {scope}: {claim}" if date else f"{scope}: {claim}"
            if claim not in source:
                line += f" (source: {source[:200]})"
            line += f" ({verification}; seen {seen}x)"
            if history:
                line += "\n  before: " + " | ".join(history.splitlines()[-HISTORY_SHOWN:])
            parts.append(line)
        return "\n".join(parts)[:MAX_CONTEXT_CHARS]
