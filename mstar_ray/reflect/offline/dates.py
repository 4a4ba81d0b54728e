"""What ``write()`` keeps and how it is keyed: ``date_aware_writes`` and ``write_per_line``.

``date_aware_writes``: every line ``write()`` receives keeps the date it was said on.

A text of experience opens with a ``[date]`` header and its lines under it carry none, so a piece cut out
of it (a chunk, a turn, an extracted line) loses its date, and a "when" question over that piece cannot be
answered: the paper's evolved programs keep dates on their items. The child passes the raw text through a
helper at the top of ``write()`` that puts the header in front of each line under it; where the text has no
header and the program's ``KnowledgeItem`` has a date field (by its name), that field's value is the header.
Whatever the program then stores is date-aware, in whatever way it keys or cuts the text.

``write_per_line``: a program that stores whole texts ranks whole texts, and a bounded ``read()`` then holds a
session or two; keyed by line (each under its date), the same ranking code ranks turns.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Collection

from mstar_ray.contract import LOGIC_CLASS
from mstar_ray.reflect.offline.engine import (
    _Edit, Mutation, NoMutation, _Source, _apply, _bindings, _comment_start, _first_statement, _indent_of,
    _methods, _module_class, _valid,
)
from mstar_ray.reflect.offline.writes import _constant_insertion, _stores_something

HELPER = "dated_lines"
_DATE_FIELD = re.compile(r"date|time|when|day", re.IGNORECASE)

_HELPER_SOURCE = f'''# Each line of a text under the [date] header it was said under, so that any piece cut out of it keeps its date.
def {HELPER}(text, fallback=""):
    header = "[" + fallback + "]" if fallback else ""
    out = []
    for line in text.split("\\n"):
        line = line.strip()
        if line.startswith("[") and "]" in line:
            header = line.split("]", 1)[0] + "]"
            if line[len(header):].strip():
                out.append(line)
        elif line:
            out.append(header + " " + line if header else line)
    return "\\n".join(out)
'''


def _date_field(tree: ast.Module) -> str | None:
    """The first str field of ``KnowledgeItem`` whose name says it holds a date."""
    item = _module_class(tree, "KnowledgeItem")
    for stmt in item.body if item else []:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and _DATE_FIELD.search(stmt.target.id):
            if isinstance(stmt.annotation, ast.Name) and stmt.annotation.id == "str":
                return stmt.target.id
    return None


def date_aware_writes(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Make ``write()`` put each line's ``[date]`` header in front of it before storing anything (once)."""
    parsed = _Source(source)
    cls = _module_class(parsed.tree, LOGIC_CLASS)
    write = _methods(cls).get("write") if cls else None
    params = (write.args.posonlyargs + write.args.args) if write else []
    first = _first_statement(write) if write else None
    if write is None or len(params) < 3 or first is None or not _stores_something(write):
        raise NoMutation("write() has no raw text to date")
    if HELPER in _bindings(parsed.tree):
        raise NoMutation("write() already dates every line")
    item, raw = params[1].arg, params[2].arg
    field = _date_field(parsed.tree)
    fallback = f", {item}.{field}" if field else ""
    at = parsed.line_starts[_comment_start(parsed, first) - 1]
    line = f"{_indent_of(parsed, first)}{raw} = {HELPER}({raw}{fallback})\n"
    child = _apply(source, [_constant_insertion(parsed, "\n\n" + _HELPER_SOURCE), _Edit(at, at, line)])
    if not _valid(source, child, avoid):
        raise NoMutation("dating write()'s lines gives no new valid program")
    where = f" (else the item's {field})" if field else ""
    return Mutation("date_aware_writes", f"write() keeps each line's [date] header on the line{where}, so every "
                    "stored piece carries its date", child)


LINE_METHOD = "write_line"


def write_per_line(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Key memory by line: ``write()`` hands each line of a text, under its ``[date]`` header, to the program's
    own storing code (the former ``write()``, now ``write_line()``), so memory keeps and ranks turns instead
    of whole texts (once). The item's fields are the text's, shared by its lines."""
    parsed = _Source(source)
    cls = _module_class(parsed.tree, LOGIC_CLASS)
    methods = _methods(cls) if cls else {}
    write = methods.get("write")
    params = (write.args.posonlyargs + write.args.args) if write else []
    if write is None or len(params) < 3 or not _stores_something(write) or write.args.vararg or write.args.kwonlyargs:
        raise NoMutation("write() has no raw text to split")
    if LINE_METHOD in methods or LINE_METHOD in _bindings(parsed.tree):
        raise NoMutation("write() already stores line by line")
    me, item, raw = (p.arg for p in params[:3])
    field = _date_field(parsed.tree)
    fallback = f", {item}.{field}" if field else ""
    indent = _indent_of(parsed, write)
    inner = indent + "    "
    start = parsed.block_span(write)[0]
    new = (f"{indent}def write(self_, {item}, {raw}):\n".replace("self_", me)
           + f"{inner}# One entry per line, under its text's [date] header: memory keeps and ranks turns, not whole texts.\n"
           + f"{inner}for line in {HELPER}({raw}{fallback}).split(\"\\n\"):\n"
           + f"{inner}    {me}.{LINE_METHOD}({item}, line)\n\n")
    def_line = parsed.lines[write.lineno - 1]
    at = parsed.line_starts[write.lineno - 1] + def_line.index("def write") + len("def ")
    edits = [_Edit(start, start, new), _Edit(at, at + len("write"), LINE_METHOD)]
    if HELPER not in _bindings(parsed.tree):
        edits.append(_constant_insertion(parsed, "\n\n" + _HELPER_SOURCE))
    child = _apply(source, edits)
    if not _valid(source, child, avoid):
        raise NoMutation("storing write()'s text line by line gives no new valid program")
    return Mutation("write_per_line", "write() stores each line of a text (a turn) under its [date] header as its own "
                    "entry, through the former write(), now write_line()", child)
