"""``speaker_date_table``: a SQLite table of date and speaker beside whatever the program stores.

"What does Olivia drive now?" and "When did Olivia get the Fiat?" need Olivia's own statements with their dates,
the newest first. A program that ranks chunks by similarity returns what resembles the question, which is often
an older statement (it shares more words with the question) or a line cut from its session's ``[date]`` header.
The paper's evolved programs keep a table of date and speaker beside their vectors; this edit gives any program
one, in the program's own SQLite (``toolkit.db``, a table of its own):

- ``__init__`` creates the table; ``write()`` first stores each line of the raw text that states a speaker
  ("Name: ...", as the offline agent reads a turn), under the ``[date]`` header it was said under (the rule of
  ``date_aware_writes``, whose helper it shares: else the item's date field), with a key that sorts the date
  in time order ("1:56 pm on 8 May, 2023", "8 May 2023", "2023-05-08"), then does what it did before;
- every value ``read()`` returns passes through a helper that keeps it and adds, after it, the rows of the
  speakers the query names (a speaker whose name, in any case, is a word of one of the Query's text fields, not a
  question word): those sharing a content word with the query, the rarer (among the person's lines) the words
  they share the earlier, newest first among equals (all of the person's, newest first, if the query asks nothing
  beyond the name), at most ``SPEAKER_ROWS``, none whose words read() already found (with or without its date).
  The whole stays within ``TABLE_READ_CHARS`` (``READ_LIMIT``): where read() already filled it, its last lines
  give way to the rows, which never take more than a third of the room unless read() left more free.

``read()`` itself is not renamed or repeated: a ``read()`` that asks the toolkit model asks it as often as
before, and the edits that tune read()'s own code still find it. The helpers go into the program as plain
functions without imports.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Collection

from mstar_ray.contract import LOGIC_CLASS
from mstar_ray.reflect.offline.dates import HELPER as DATED_LINES, _HELPER_SOURCE as _DATED_LINES_SOURCE, _date_field
from mstar_ray.reflect.offline.engine import (
    READ_LIMIT, _Edit, Mutation, NoMutation, _Source, _apply, _bindings, _comment_start, _first_statement,
    _indent_of, _methods, _module_class, _valid,
)
from mstar_ray.reflect.offline.lines import _returns
from mstar_ray.reflect.offline.writes import _class_attributes, _constant_insertion, _stores_something

TABLE = "speaker_dated_lines"
OPEN = "open_speaker_table"
STORE = "store_speaker_lines"
ADD = "with_speaker_rows"
ATTRIBUTE = "_speaker_table"
SPEAKER_ROWS = 6
_NAMES = frozenset({OPEN, STORE, ADD, "SPEAKER_ROWS", "TABLE_READ_CHARS", "TABLE_STOP", "TABLE_MONTHS",
                    "speaker_of", "date_order", "table_terms"})

_HELPERS = f'''# A person's own statements, each with the date and speaker it states, kept in a SQLite table
# beside what the program stores: read() adds those of the person a query names, newest first.
SPEAKER_ROWS = {SPEAKER_ROWS}
# What read() returns with the added rows stays within this many characters.
TABLE_READ_CHARS = {READ_LIMIT}
TABLE_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# Words of a question that say what kind of answer it wants, not what it is about.
TABLE_STOP = frozenset(
    "what when where which whom whose does did have has had the and for with about now current currently still "
    "latest these days anymore that this from into their there they them her his she him you your been will "
    "would could should can are was were who how why kind type".split()
)


def {OPEN}(db):
    db.execute("CREATE TABLE IF NOT EXISTS {TABLE} (id INTEGER PRIMARY KEY, date TEXT, date_key TEXT, "
               "speaker TEXT, line TEXT)")
    return db


def speaker_of(line):
    """Who says a line ("[date] Olivia: ..." -> "Olivia"): up to four capitalised words before ": "."""
    body = line.split("] ", 1)[-1] if line.startswith("[") else line
    head, sep, said = body.partition(": ")
    words = head.split()
    if not sep or not said.strip() or not 0 < len(words) <= 4 or head.isupper():
        return ""
    return head.strip() if all(w[:1].isupper() and w.replace("'", "").replace(".", "").replace("-", "").isalnum()
                               for w in words) else ""


def date_order(date):
    """A key that sorts dates as written ("1:56 pm on 8 May, 2023", "8 May 2023", "2023-05-08") in time order;
    "" for a text without a year."""
    year = month = day = minute = 0
    for token in date.replace(",", " ").replace("/", " ").split():
        t = token.lower().strip(".")
        if t.count("-") == 2 and t.replace("-", "").isdigit():
            year, month, day = (int(p) for p in t.split("-"))
        elif t[:1].isdigit() and ":" in t and t.replace(":", "").isdigit():
            hours, minutes = t.split(":")[:2]
            minute = int(hours) * 60 + int(minutes or 0)
        elif t in ("pm", "p.m") and minute < 720:
            minute += 720
        elif t in ("am", "a.m") and 720 <= minute < 780:
            minute -= 720
        elif t[:1].isdigit() and t.rstrip("stndrh").isdigit():
            number = int(t.rstrip("stndrh"))
            if len(t.rstrip("stndrh")) == 4:
                year = number
            elif number <= 31:
                day = number
        elif t.isalpha() and t[:3] in TABLE_MONTHS and len(t) >= 3:
            month = TABLE_MONTHS.index(t[:3]) + 1
    return f"{{year:04d}}-{{month:02d}}-{{day:02d}} {{minute:04d}}" if year else ""


def {STORE}(db, dated):
    """Store each line of a dated text (each line under its "[date] ") that states its speaker."""
    rows = []
    for line in dated.split("\\n"):
        speaker = speaker_of(line)
        if speaker:
            date = line[1:line.index("]")] if line.startswith("[") and "]" in line else ""
            rows.append((date, date_order(date), speaker, line))
    if rows:
        db.executemany("INSERT INTO {TABLE} (date, date_key, speaker, line) VALUES (?, ?, ?, ?)", rows)
        db.commit()


def table_terms(text):
    """Content words, crudely stemmed ("adopted" and "adopts" -> "adopt"), question words left out."""
    out = set()
    for word in "".join(c if c.isalnum() else " " for c in text.lower()).split():
        if len(word) < 3 or word in TABLE_STOP:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[:-len(suffix)]
                break
        out.add(word[:-1] if word.endswith("e") and len(word) > 3 else word)
    return out


def {ADD}(found, db, asked):
    """What read() found, then the rows of the speakers ``asked`` names (those sharing its rarer content words
    first, else newest first; all, newest first, if it asks nothing beyond the names), each once, within
    TABLE_READ_CHARS."""
    if not isinstance(found, str):
        return found
    # A name in any case ("mirela" in a query a model wrote in lower case), but never a question word ("Will").
    said = set()
    for word in asked.lower().split():
        word = word.strip("?.,!:;\\"()[]")
        said.add(word[:-2] if word.endswith("'s") or word.endswith("\\u2019s") else word)
    said -= TABLE_STOP
    speakers = [s for (s,) in db.execute("SELECT DISTINCT speaker FROM {TABLE}").fetchall()
                if s.lower() in said or (" " in s and s.lower() in asked.lower())]
    if not speakers:
        return found
    marks = ", ".join("?" for _ in speakers)
    newest_first = "SELECT line FROM {TABLE} WHERE speaker IN (" + marks + ") ORDER BY date_key DESC, id DESC"
    rows = [line for (line,) in db.execute(newest_first, speakers)]
    wanted = table_terms(asked) - table_terms(" ".join(speakers))
    if wanted:
        # Rows sharing the query's rarer words (among this person's rows) first, the newest first among equals.
        shared = [(line, wanted & table_terms(line.split("] ", 1)[-1])) for line in rows]
        counts = {{}}
        for _, terms in shared:
            for term in terms:
                counts[term] = counts.get(term, 0) + 1
        weighed = [(-sum(1 / counts[t] for t in terms), line) for line, terms in shared if terms]
        rows = [line for _, line in sorted(weighed, key=lambda pair: pair[0])]
    free = max(TABLE_READ_CHARS - len(found) - 1, TABLE_READ_CHARS // 3)
    block, size = [], 0
    for line in rows:
        if len(block) >= SPEAKER_ROWS:
            break
        if line.split("] ", 1)[-1] in found or line in block or size + len(line) + 1 > free:
            continue
        block.append(line)
        size += len(line) + 1
    if not block:
        return found
    room = TABLE_READ_CHARS - size
    kept = found if len(found) <= room else found[:room].rsplit("\\n", 1)[0]
    return (kept + "\\n" if kept else "") + "\\n".join(block)
'''


def _query_texts(tree: ast.Module, query: str) -> list[str]:
    """Expressions for the text the Query carries: its ``str`` fields, and the items of its ``list[str]`` ones."""
    schema = _module_class(tree, "Query")
    texts = []
    for stmt in schema.body if schema else []:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        name, annotation = stmt.target.id, ast.unparse(stmt.annotation).replace(" ", "")
        if annotation == "str":
            texts.append(f"{query}.{name} or ''")
        elif annotation in ("list[str]", "List[str]"):
            texts.append(f"' '.join({query}.{name} or [])")
    return texts


def speaker_date_table(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Give the program a SQLite table of each stated line's date and speaker, stored by ``write()``, and make
    ``read()`` add the dated lines of the person the query names, newest first (once per program)."""
    parsed = _Source(source)
    cls = _module_class(parsed.tree, LOGIC_CLASS)
    methods = _methods(cls) if cls else {}
    init, write, read = methods.get("__init__"), methods.get("write"), methods.get("read")
    if cls is None or init is None or write is None or read is None:
        raise NoMutation("the program has no __init__(), write() and read() to give a table")
    if _NAMES & set(_bindings(parsed.tree)) or ATTRIBUTE in _class_attributes(cls) or TABLE in source:
        raise NoMutation("the program already keeps a table of date and speaker")
    init_params = init.args.posonlyargs + init.args.args
    write_params = write.args.posonlyargs + write.args.args
    read_params = read.args.posonlyargs + read.args.args
    first_init, first_write = _first_statement(init), _first_statement(write)
    if len(init_params) < 2 or first_init is None:
        raise NoMutation("__init__() takes no toolkit to open a table with")
    if len(write_params) < 3 or first_write is None or not _stores_something(write):
        raise NoMutation("write() has no raw text to store")
    if len(read_params) != 2 or read.args.vararg or read.args.kwarg or read.args.kwonlyargs:
        raise NoMutation("read() does not take (self, query)")
    query = read_params[1].arg
    if any(isinstance(n, ast.Name) and n.id == query and not isinstance(n.ctx, ast.Load) for n in ast.walk(read)):
        raise NoMutation("read() rebinds its query: what it returns could not be matched against it")
    texts = _query_texts(parsed.tree, query)
    if not texts:
        raise NoMutation("the Query has no text field to name a person in")
    me = read_params[0].arg
    asked = f'" ".join([{", ".join(texts)}])'
    wraps = [edit for node in _returns(read) if node.value is not None
             and (edit := _wrapped_whole(parsed, node.value, f", {me}.{ATTRIBUTE}, {asked}"))]
    if not wraps:
        raise NoMutation("read() returns nothing but literals")
    init_me, toolkit = init_params[0].arg, init_params[1].arg
    at_init = parsed.line_starts[_comment_start(parsed, first_init) - 1]
    opening = (f"{_indent_of(parsed, first_init)}# Each stated line with its date and speaker, in the program's own "
               "SQLite.\n"
               f"{_indent_of(parsed, first_init)}{init_me}.{ATTRIBUTE} = {OPEN}({toolkit}.db)\n")
    write_me, item, raw = (p.arg for p in write_params[:3])
    field = _date_field(parsed.tree)
    fallback = f", {item}.{field}" if field else ""
    at_write = parsed.line_starts[_comment_start(parsed, first_write) - 1]
    storing = f"{_indent_of(parsed, first_write)}{STORE}({write_me}.{ATTRIBUTE}, {DATED_LINES}({raw}{fallback}))\n"
    helpers = _HELPERS if DATED_LINES in _bindings(parsed.tree) else _DATED_LINES_SOURCE + "\n\n" + _HELPERS
    edits = [_constant_insertion(parsed, "\n\n" + helpers), _Edit(at_init, at_init, opening),
             _Edit(at_write, at_write, storing), *wraps]
    child = _apply(source, edits)
    if not _valid(source, child, avoid):
        raise NoMutation("a table of date and speaker gives no new valid program")
    return Mutation("speaker_date_table", "write() also stores each stated line with its date and speaker in a SQLite "
                    "table; read() adds the dated lines of the person the query names, newest first, within "
                    f"TABLE_READ_CHARS = {READ_LIMIT}", child)


def _wrapped_whole(parsed: _Source, value: ast.expr, extra: str) -> _Edit | None:
    """The edit passing the whole of ``value`` (its cap included: the helper keeps within its own) through the
    helper; None for a literal."""
    if isinstance(value, ast.Constant):
        return None
    start, end = parsed.span(value)
    return _Edit(start, end, f"{ADD}({parsed.segment(value)}{extra})")
