"""Seed: SelfMem (Yang et al., 2026, "SelfMem: self-optimising memory for AI agents"). The transcript is the
source of truth: an append-only SQLite table ``turns`` (turn index, turn id, speaker role, time anchor,
content, rendered line, character count) that nothing ever updates or deletes. ``read()`` spends its one
LLM call writing a read-only SQL query over ``turns``, given the table's schema and statistics; the query
runs under a SQLite authorizer that allows nothing but reading (and ``PRAGMA query_only``, a statement
budget and a row cap), and its rows are the context. A reply without a usable query, a query that fails,
or one that finds nothing falls back to a ranked keyword search (FTS5, BM25) over the same table. Each
write also keeps the task agent's note in a small workspace table, shown with the rows it relates to.

Left out, and why: SelfMem's memory agent takes many tool steps per question (a manifest call, several
SQL queries, workspace reads, writes, reviews and probes) and optimises its own memory policy from
feedback signals; the contract allows one LLM call per read and none of that loop, so the agent writes
one query and the workspace is filled by extraction rather than by an agent revising it. The policy
optimisation itself is what this search does to the program.
"""

import re
import sqlite3
from dataclasses import dataclass, field

COMMIT_MESSAGE = "Seed (SelfMem): immutable SQLite transcript; read = one LLM-written read-only SQL query, keyword fallback."

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Read this part of the conversation. Give who speaks, the time anchor exactly as written, and a short "
    "workspace note: the durable fact worth remembering from it (a preference, plan, event, date or number), "
    "or an empty note if there is none."
)
INSTRUCTION_QUERY = (
    "Restate the question for a search of the conversation transcript: the full question, and the names, "
    "dates and distinctive words the matching turns would contain."
)
INSTRUCTION_RESPONSE = (
    "Answer from the transcript rows and notes. Rows are in time order, each with its time anchor; when facts "
    "changed, the latest row holds the current one. Give the shortest correct answer."
)
ALWAYS_ON_KNOWLEDGE = ""

MAX_CONTEXT_CHARS = 3000
MAX_ROWS = 40
ROW_CHARS = 400
FALLBACK_ROWS = 12
NEIGHBOUR_TURNS = 1
NOTES_SHOWN = 4
# SQLite virtual-machine instructions a model-written query may run before it is stopped (about a second).
QUERY_VM_STEPS = 20_000_000
PROGRESS_EVERY = 10_000

SCHEMA = (
    "CREATE TABLE turns (turn_index INTEGER PRIMARY KEY, turn_id TEXT, role TEXT, time_anchor TEXT, "
    "content TEXT, rendered TEXT, char_count INTEGER)"
)
# Functions a model-written query may call; anything else (randomblob, zeroblob, load_extension...) is denied.
SQL_FUNCTIONS = frozenset(
    "lower upper length substr substring instr like glob trim ltrim rtrim count min max sum total avg abs "
    "coalesce ifnull nullif date time datetime julianday strftime group_concat round".split()
)
ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION})
HEADER = re.compile(r"^\[(?P<anchor>[^\]]{1,80})\]\s*(?:(?P<speaker>[A-Za-z][\w .'-]{0,40}):\s)?(?P<body>.*)$")
STOP = frozenset(
    "a an and are as at be by did do does for from had has have he her him his how i in is it its me my of on "
    "or our she so that the their them they this to was we were what when where which who whom why will with "
    "would you your".split()
)


@dataclass
class KnowledgeItem:
    speaker: str = field(metadata={"description": "who speaks in this part of the conversation"})
    time_anchor: str = field(metadata={"description": "when it was said, exactly as written in the text"})
    note: str = field(metadata={"description": "the durable fact worth keeping in the workspace, or empty"})


@dataclass
class Query:
    question: str = field(metadata={"description": "the question, stated in full"})
    keywords: list[str] = field(metadata={"description": "names, dates and distinctive words to search for"})


def words(text):
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP and len(w) > 1]


def split_turns(raw_text, item):
    """(role, time anchor, content, rendered) for each turn in a text: a line "[anchor] Speaker: ..." opens
    a turn; other lines continue the one before (a long message keeps its layout)."""
    turns = []
    for line in raw_text.splitlines():
        match = HEADER.match(line.strip())
        if match and turns and not match.group("speaker"):
            match = None  # "[a link](...)" inside a message is not a new turn
        if match or not turns:
            anchor = match.group("anchor") if match else (item.time_anchor or "")
            role = (match.group("speaker") if match else None) or item.speaker or ""
            body = match.group("body") if match else line.strip()
            turns.append([role.strip(), anchor.strip(), body, line.rstrip()])
        else:
            turns[-1][2] += "\n" + line
            turns[-1][3] += "\n" + line
    return [t for t in turns if t[2].strip() or t[3].strip()]


def extract_sql(reply):
    """The first SELECT (or WITH) statement in a reply, from a code fence if there is one."""
    fenced = re.search(r"```(?:sql)?\s*(.*?)```", reply, re.S | re.I)
    text = fenced.group(1) if fenced else reply
    match = re.search(r"(?im)^\s*(select|with)\b", text) or re.search(r"(?i)\bselect\b(?=.*\bfrom\b)", text, re.S)
    if match is None:
        return None
    statement = text[match.start():].split(";")[0].strip()
    return statement or None


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.execute(SCHEMA)
        self.db.execute("CREATE VIRTUAL TABLE turns_fts USING fts5(body, tokenize='porter')")
        self.db.execute("CREATE TABLE workspace (turn_index INTEGER, note TEXT)")
        self.count = 0
        self.steps = 0

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        for role, anchor, content, rendered in split_turns(raw_text, item):
            self.count += 1
            self.db.execute(
                "INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?)",
                (self.count, f"t{self.count}", role, anchor, content, rendered, len(content)),
            )
            self.db.execute("INSERT INTO turns_fts (rowid, body) VALUES (?, ?)", (self.count, rendered))
        note = (item.note or "").strip()
        if note and self.count:
            self.db.execute("INSERT INTO workspace VALUES (?, ?)", (self.count, note))
        self.db.commit()

    # -- read ------------------------------------------------------------------------------------

    def read(self, query: Query) -> str:
        if self.count == 0:
            return ""
        request = " ".join([query.question or "", *(query.keywords or [])]).strip()
        rows = None
        sql = self._write_sql(request)
        if sql:
            rows = self._run_readonly(sql)
        if not rows:
            rows = self._keyword_rows(request)
        return self._render(rows, request)

    def _manifest(self):
        """The schema and statistics the model gets before writing its query."""
        roles = self.db.execute("SELECT role, COUNT(*) FROM turns GROUP BY role ORDER BY 2 DESC LIMIT 6").fetchall()
        first, last = self.db.execute(
            "SELECT (SELECT time_anchor FROM turns ORDER BY turn_index LIMIT 1), "
            "(SELECT time_anchor FROM turns ORDER BY turn_index DESC LIMIT 1)"
        ).fetchone()
        speakers = ", ".join(f"{role or '(none)'} ({n})" for role, n in roles)
        return (
            f"Table: {SCHEMA}\n"
            f"Statistics: {self.count} turns; roles {speakers}; first time anchor {first!r}, last {last!r}.\n"
            "time_anchor is text as written in the conversation; content is what was said; rendered is the "
            "whole line with its time anchor and speaker."
        )

    def _write_sql(self, request):
        prompt = (
            f"{self._manifest()}\n\n"
            f"Question: {request}?\n"
            "Write ONE read-only SQLite SELECT over the table turns that returns the rows needed to answer "
            "(select rendered, order by turn_index, at most 40 rows; match words with LIKE, case-insensitive)? "
            "Reply with the SQL only."
        )
        try:
            reply = self.toolkit.llm_completion([{"role": "user", "content": prompt}])
        except Exception as exc:
            self.toolkit.logger.debug(f"no SQL from the model ({exc}); keyword search instead")
            return None
        return extract_sql(str(reply))

    def _authorize(self, action, arg1, arg2, database, source):
        if action not in ALLOWED_ACTIONS:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() not in SQL_FUNCTIONS:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def _progress(self):
        self.steps += 1
        return 1 if self.steps * PROGRESS_EVERY > QUERY_VM_STEPS else 0

    def _run_readonly(self, sql):
        """Rows of a model-written query, which may only read: query_only, an authorizer that denies every
        action but SELECT, READ and whitelisted functions, a step budget, one statement, a row cap."""
        self.steps = 0
        self.db.commit()
        self.db.execute("PRAGMA query_only = ON")
        self.db.set_authorizer(self._authorize)
        self.db.set_progress_handler(self._progress, PROGRESS_EVERY)
        try:
            cursor = self.db.execute(sql)
            rows = cursor.fetchmany(MAX_ROWS)
        except Exception as exc:  # bad SQL, a denied action, the step budget: all fall back
            self.toolkit.logger.debug(f"model SQL refused or failed ({exc}): {sql[:200]}")
            rows = None
        finally:
            self.db.set_progress_handler(None, PROGRESS_EVERY)
            self.db.set_authorizer(None)
            self.db.execute("PRAGMA query_only = OFF")
        if not rows:
            return None
        return [" | ".join(str(value) for value in row if value is not None)[:ROW_CHARS] for row in rows]

    def _keyword_rows(self, request):
        """BM25 over the transcript: the best hits, each with its neighbouring turns, as many as fit in a
        read, shown in time order."""
        terms = sorted(set(words(request)))
        if not terms:
            return []
        match = " OR ".join(f'"{term}"' for term in terms)
        hits = self.db.execute(
            "SELECT rowid FROM turns_fts WHERE turns_fts MATCH ? ORDER BY bm25(turns_fts) LIMIT ?",
            (match, FALLBACK_ROWS),
        ).fetchall()
        chosen, size = {}, 0
        for (index,) in hits:
            around = self.db.execute(
                "SELECT turn_index, rendered FROM turns WHERE turn_index BETWEEN ? AND ?",
                (index - NEIGHBOUR_TURNS, index + NEIGHBOUR_TURNS),
            ).fetchall()
            new = [(i, text[:ROW_CHARS]) for i, text in around if i not in chosen]
            cost = sum(len(text) + 1 for _, text in new)
            if size + cost > MAX_CONTEXT_CHARS:
                break
            chosen.update(new)
            size += cost
        return [chosen[i] for i in sorted(chosen)]

    def _render(self, rows, request):
        wanted = set(words(request))
        notes = self.db.execute("SELECT note FROM workspace ORDER BY turn_index DESC").fetchall()
        related = [n for (n,) in notes if wanted & set(words(n))][:NOTES_SHOWN]
        text = "\n".join(rows)
        if related:  # after the transcript, the source of truth, so that a full read cuts notes first
            text += "\n\nWorkspace notes:\n" + "\n".join(related)
        return text[:MAX_CONTEXT_CHARS]
