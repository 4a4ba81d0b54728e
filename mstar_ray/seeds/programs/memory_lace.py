"""Seed: MemoryLACE (2026). Memory is a set of atomic, dated memories, each with its source text, and three
explicit, sparse relations between them: merge (the same evidence again: the copy is linked to the memory
it repeats, its source kept), supersede (a later state of the same subject replaces an earlier one, which
leaves normal recall but stays reachable through the relation) and conflict (two states that cannot both
hold and are not ordered in time: both stay active). A read starts from active anchors (vector search,
filtered to active memories) and expands each along its relations, so an answer sees the current state
together with the history it replaced and any unresolved contradiction, grouped as evidence units.

Relations are decided on write: a memory of the same subject as an active one is compared with it; clear
cases (near-identical, or one clearly later) are settled by rule, and an ambiguous pair (same subject,
same or unknown time, different content) costs the write its one LLM call, whose one-word verdict is used
if it is one of the four labels (else the rule decides: conflict).

Left out, and why: MemoryLACE also re-ranks evidence units with a model and types relations with richer
scope checks; here ranking is the vector store's and scope is the subject string the task agent extracts.
Memories are kept in SQLite (``memory`` and ``relation`` tables) and embedded in Chroma.
"""

import re
from dataclasses import dataclass, field

COMMIT_MESSAGE = "Seed (MemoryLACE): atomic dated memories with merge/supersede/conflict relations; reads expand anchors."

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Write one atomic memory from this text: the subject it is about (a person and an attribute, such as "
    "'Anna's job'), the statement itself in one sentence, who said it and the date it refers to, as written."
)
INSTRUCTION_QUERY = "Name the subject the question is about and restate what is asked."
INSTRUCTION_RESPONSE = (
    "Answer from the memories. A memory marked 'superseded' was true earlier and replaced by the one above it; "
    "a 'conflict' pair disagrees and both are shown. Give the shortest correct answer."
)
ALWAYS_ON_KNOWLEDGE = ""

MAX_CONTEXT_CHARS = 3000
ANCHORS = 6
CANDIDATES = 24
SOURCE_CHARS = 300
MERGE_SIMILARITY = 0.8
SAME_SUBJECT_SIMILARITY = 0.6
RELATED_SHOWN = 3
LABELS = ("MERGE", "SUPERSEDE", "CONFLICT", "INDEPENDENT")
MONTHS = {m: i + 1 for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}


@dataclass
class KnowledgeItem:
    subject: str = field(metadata={"description": "who or what the memory is about, e.g. 'Anna's job'"})
    statement: str = field(metadata={"description": "the memory in one sentence"})
    speaker: str = field(metadata={"description": "who said it"})
    date: str = field(metadata={"description": "the date the memory refers to, as written"})


@dataclass
class Query:
    subject: str = field(metadata={"description": "who or what the question is about"})
    question: str = field(metadata={"description": "what is asked, in full"})


def words(text):
    return set(re.findall(r"[a-z0-9]+", (text or "").lower()))


def jaccard(a, b):
    return len(a & b) / len(a | b) if a and b else 0.0


def date_key(text):
    """(year, month, day) from a date as written ("8 May, 2023", "2023-05-08", "May 8 2023"), else None."""
    text = (text or "").lower()
    iso = re.search(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", text)
    if iso:
        return tuple(int(x) for x in iso.groups())
    year = re.search(r"\b(19|20)\d\d\b", text)
    month = next((n for name, n in MONTHS.items() if re.search(rf"\b{name}[a-z]*\b", text)), None)
    if not year or month is None:
        return None
    day = re.search(r"\b(\d{1,2})(?:st|nd|rd|th)?\b", text.replace(year.group(0), ""))
    return (int(year.group(0)), month, int(day.group(1)) if day else 0)


def subject_key(text):
    return " ".join(sorted(words(text)))


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.execute(
            "CREATE TABLE memory (id INTEGER PRIMARY KEY, subject TEXT, subject_key TEXT, statement TEXT, "
            "event_time TEXT, observed_at INTEGER, source TEXT, status TEXT)"
        )
        self.db.execute("CREATE TABLE relation (from_id INTEGER, type TEXT, to_id INTEGER)")
        self.collection = toolkit.chroma.get_or_create_collection("memories")
        self.count = 0

    # -- write -----------------------------------------------------------------------------------

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        statement = (item.statement or raw_text).strip()
        if not statement:
            return
        subject = (item.subject or item.speaker or "").strip()
        self.count += 1
        new_id = self.count
        self.db.execute(
            "INSERT INTO memory VALUES (?, ?, ?, ?, ?, ?, ?, 'active')",
            (new_id, subject, subject_key(subject), statement, item.date or "", new_id, raw_text.strip()),
        )
        said_by = f"{item.speaker}: " if item.speaker and item.speaker not in statement else ""
        self.collection.add(ids=[str(new_id)], documents=[said_by + statement])
        old = self._same_subject(new_id, subject, statement)
        if old is not None:
            self._relate(new_id, old, statement, item.date or "")
        self.db.commit()

    def _same_subject(self, new_id, subject, statement):
        """The most similar active memory of the same subject (or a near-copy of the statement), if any."""
        key = subject_key(subject)
        rows = self.db.execute(
            "SELECT id, subject_key, statement, event_time FROM memory WHERE status = 'active' AND id != ? "
            "ORDER BY id DESC LIMIT 400",
            (new_id,),
        ).fetchall()
        mine = words(statement)
        best, best_score = None, 0.0
        for row in rows:
            similarity = jaccard(mine, words(row[2]))
            same_subject = bool(key) and (row[1] == key or jaccard(set(key.split()), set(row[1].split())) >= SAME_SUBJECT_SIMILARITY)
            if (same_subject or similarity >= MERGE_SIMILARITY) and similarity >= best_score:
                best, best_score = row, similarity
        return best

    def _relate(self, new_id, old, statement, event_time):
        old_id, _, old_statement, old_time = old
        similarity = jaccard(words(statement), words(old_statement))
        new_key, old_key = date_key(event_time), date_key(old_time)
        if similarity >= MERGE_SIMILARITY:
            label = "MERGE"
        elif new_key and old_key and new_key != old_key:
            label = "SUPERSEDE"
        else:
            label = self._ask(old_statement, statement) or "CONFLICT"
        if label == "MERGE":
            self._relation(new_id, "merge", old_id, retire=new_id, status="merged")
        elif label == "SUPERSEDE":
            # A later write is not a later fact: the earlier-dated memory is the one replaced.
            newer, older = (old_id, new_id) if new_key and old_key and new_key < old_key else (new_id, old_id)
            self._relation(newer, "supersede", older, retire=older, status="superseded")
        elif label == "CONFLICT":
            self._relation(new_id, "conflict", old_id)

    def _relation(self, from_id, kind, to_id, retire=None, status=None):
        self.db.execute("INSERT INTO relation VALUES (?, ?, ?)", (from_id, kind, to_id))
        if retire is not None:
            self.db.execute("UPDATE memory SET status = ? WHERE id = ?", (status, retire))

    def _ask(self, old, new):
        prompt = (
            f"A: {old}\nB: {new}\n"
            "Both memories are about the same subject. Is B a repeat of A (MERGE), a later state that replaces "
            "A (SUPERSEDE), a contradiction of A (CONFLICT), or compatible with A (INDEPENDENT)? Reply with one word."
        )
        try:
            reply = str(self.toolkit.llm_completion([{"role": "user", "content": prompt}]))
        except Exception as exc:
            self.toolkit.logger.debug(f"relation verdict failed ({exc}); using the rule")
            return None
        first = re.findall(r"[A-Za-z]+", reply)
        return first[0].upper() if first and first[0].upper() in LABELS else None

    # -- read ------------------------------------------------------------------------------------

    def read(self, query: Query) -> str:
        if self.count == 0:
            return ""
        text = f"{query.subject} {query.question}".strip()
        found = self.collection.query(query_texts=[text], n_results=min(CANDIDATES, self.count))
        ids = [int(i) for i in found["ids"][0]]
        anchors = []
        for memory_id in ids:
            row = self._memory(memory_id)
            if row is not None and row["status"] == "active":
                anchors.append(row)
            if len(anchors) >= ANCHORS:
                break
        units, shown = [], set()
        for anchor in anchors:
            if anchor["id"] in shown:
                continue
            shown.add(anchor["id"])
            lines = [self._line(anchor, "")]
            for kind, other_id in self._relations(anchor["id"])[:RELATED_SHOWN]:
                if other_id in shown:
                    continue
                shown.add(other_id)
                other = self._memory(other_id)
                if other is not None:
                    lines.append("  " + self._line(other, kind))
            units.append("\n".join(lines))
        return "\n\n".join(units)[:MAX_CONTEXT_CHARS]

    def _memory(self, memory_id):
        row = self.db.execute(
            "SELECT id, subject, statement, event_time, source, status FROM memory WHERE id = ?", (memory_id,)
        ).fetchone()
        if row is None:
            return None
        return dict(zip(("id", "subject", "statement", "event_time", "source", "status"), row))

    def _relations(self, memory_id):
        """(what the other memory is to this one, its id): what it superseded, what merged into it, conflicts."""
        rows = self.db.execute(
            "SELECT type, to_id FROM relation WHERE from_id = ? UNION ALL "
            "SELECT type, from_id FROM relation WHERE to_id = ? AND type = 'conflict' UNION ALL "
            "SELECT 'merged copy', from_id FROM relation WHERE to_id = ? AND type = 'merge'",
            (memory_id, memory_id, memory_id),
        ).fetchall()
        names = {"supersede": "superseded", "conflict": "conflict", "merge": "repeats", "merged copy": "repeated by"}
        return [(names.get(kind, kind), other) for kind, other in rows if other != memory_id]

    def _line(self, row, relation):
        """The memory with its date and source; a statement copied from its source shows the source only."""
        tag = f"({relation}) " if relation else ""
        source = row["source"][:SOURCE_CHARS]
        if row["statement"] in row["source"]:
            return tag + source
        when = f"[{row['event_time']}] " if row["event_time"] else ""
        return f"{tag}{when}{row['statement']} (source: {source})"
