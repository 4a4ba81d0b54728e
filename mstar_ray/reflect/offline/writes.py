"""What memory keeps, and in which order: ``filter_writes`` stops ``write()`` from storing small talk or
repeats; ``order_by_recency`` flips whether memory keeps/returns the newest or the oldest entry first.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Collection
from typing import TypeGuard

from mstar_ray.contract import LOGIC_CLASS
from mstar_ray.program_ast import is_docstring
from mstar_ray.reflect.offline.engine import (
    _Edit, Mutation, NoMutation, _Source, _apply, _bindings, _comment_start, _constant_target,
    _first_statement, _indent_of, _method_attributes, _methods, _module_class, _valid,
)
from mstar_ray.reflect.offline.engine import _Function
from mstar_ray.reflect.offline.engine import _end_line


MIN_WRITE_WORDS_NAME = "MIN_WRITE_WORDS"
# Greetings and acknowledgements ("Sure, take care!", "So what's new with you?") are shorter than this.
MIN_WRITE_WORDS = 6
SEEN_ATTRIBUTE = "_stored_texts"
# Locals the guards introduce at the top of write(). Only a module-level name of the same spelling
# clashes (code after the guard would read the local instead); the program's own locals are assigned
# before they are read, after the guard.
_GUARD_LOCALS = frozenset({"said"})


def _stores_something(fn: _Function) -> bool:
    body = [s for s in fn.body if not is_docstring(s)]
    return any(not isinstance(s, ast.Pass) and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in body)


def _said(raw: str) -> str:
    """The guards' shared first line: what a turn says, without its leading "[date] " header."""
    return f'said = {raw}.split("] ", 1)[-1] if {raw}.startswith("[") else {raw}'


def _guard_edit(parsed: _Source, write: _Function, raw: str, lines: list[str]) -> _Edit:
    """Insert a guard at the top of write(), after the shared ``said`` line if an earlier guard put it
    there, else with that line, above any comment attached to write()'s first statement."""
    first = _first_statement(write)
    assert first is not None, "write() has a statement to guard"  # both callers check it
    indent = _indent_of(parsed, first)
    text = "".join(f"{indent}{line}\n" for line in lines)
    if ast.dump(first) == ast.dump(ast.parse(_said(raw)).body[0]):
        at = parsed.line_end(_end_line(first))
        return _Edit(at, at, text)
    at = parsed.line_starts[_comment_start(parsed, first) - 1]
    return _Edit(at, at, f"{indent}{_said(raw)}\n" + text)


def _constant_insertion(parsed: _Source, text: str) -> _Edit:
    """Insert a new constant after the last numeric module constant (with the other knobs), else before the first class."""
    constants = [stmt for stmt in parsed.tree.body if _constant_target(stmt)]
    if constants:
        at = parsed.line_end(_end_line(constants[-1]))
        return _Edit(at, at, text)
    first_class = next(s for s in parsed.tree.body if isinstance(s, ast.ClassDef))
    at = parsed.block_span(first_class)[0]
    return _Edit(at, at, text + "\n\n")


def _short_turn_filter(parsed: _Source, write: _Function, raw: str) -> tuple[list[_Edit], str] | None:
    """Skip turns of fewer than MIN_WRITE_WORDS words said (what follows the "Name: " label, if any)."""
    if MIN_WRITE_WORDS_NAME in _bindings(parsed.tree):
        return None
    guard = _guard_edit(
        parsed,
        write,
        raw,
        [
            "# Skip small talk: a turn of so few words rarely holds a fact, and it would crowd facts out of read().",
            f'if len((said.partition(": ")[2] or said).split()) < {MIN_WRITE_WORDS_NAME}:',
            "    return",
        ],
    )
    constant = (
        "# Turns saying fewer words than this (not counting the [date] header and speaker) are not stored.\n"
        f"{MIN_WRITE_WORDS_NAME} = {MIN_WRITE_WORDS}\n"
    )
    description = f"skip turns of fewer than {MIN_WRITE_WORDS_NAME} = {MIN_WRITE_WORDS} words said in write() (small talk)"
    return [_constant_insertion(parsed, constant), guard], description


def _repeat_filter(parsed: _Source, cls: ast.ClassDef, write: _Function, raw: str) -> tuple[list[_Edit], str] | None:
    """Skip turns whose words (case and spacing aside) were stored before, in a set on the instance."""
    init = _methods(cls).get("__init__")
    first_init = _first_statement(init) if init else None
    if init is None or first_init is None or SEEN_ATTRIBUTE in _class_attributes(cls):
        return None
    me = (write.args.posonlyargs + write.args.args)[0].arg
    key = '" ".join(said.lower().split())'
    guard = _guard_edit(
        parsed,
        write,
        raw,
        [
            "# Skip a turn already stored word for word: repeats crowd distinct facts out of read().",
            f"if {key} in {me}.{SEEN_ATTRIBUTE}:",
            "    return",
            f"{me}.{SEEN_ATTRIBUTE}.add({key})",
        ],
    )
    init_me = (init.args.posonlyargs + init.args.args)[0].arg
    setup = f"{_indent_of(parsed, first_init)}{init_me}.{SEEN_ATTRIBUTE} = set()\n"
    at_init = parsed.line_starts[_comment_start(parsed, first_init) - 1]
    return [_Edit(at_init, at_init, setup), guard], "skip repeated turns in write() (same words as a stored one)"


def _class_attributes(cls: ast.ClassDef) -> set[str]:
    names = set()
    for fn in _methods(cls).values():
        assigned, loaded = _method_attributes(fn)
        names |= assigned | loaded
    return names


def filter_writes(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Make ``write()`` skip turns that would only crowd facts out of a bounded ``read()``.

    Two filters, each added once, as a guard at the top of ``write()``: turns saying fewer than
    ``MIN_WRITE_WORDS`` words (a new module constant, tunable by ``perturb_numbers`` afterwards; the
    "Name: " label does not count) and turns whose words were already stored (a set kept on the
    instance). The ``[date]`` header of a turn is left out of both (it makes every repeat look new).
    Offline this measurably helps seeds whose read() fills its 3,000 characters by similarity or by
    order, where greetings and "Sure, take care!" otherwise take much of the room.
    """
    parsed = _Source(source)
    cls = _module_class(parsed.tree, LOGIC_CLASS)
    write = _methods(cls).get("write") if cls else None
    params = (write.args.posonlyargs + write.args.args) if write else []
    if cls is None or write is None or len(params) < 3 or _first_statement(write) is None or not _stores_something(write):
        raise NoMutation("write() stores nothing a filter could skip")
    if _GUARD_LOCALS & set(_bindings(parsed.tree)):
        raise NoMutation("the program defines a module-level name the filters use as a local")
    raw = params[2].arg
    options = [_short_turn_filter(parsed, write, raw), _repeat_filter(parsed, cls, write, raw)]
    candidates = [o for o in options if o is not None]
    rng.shuffle(candidates)
    for edits, description in candidates:
        child = _apply(source, edits)
        if _valid(source, child, avoid):
            return Mutation("filter_writes", description, child)
    raise NoMutation("both write filters are already in place")


_ORDER_BY = re.compile(r"(ORDER\s+BY\s+[A-Za-z_][\w.]*)(\s+(?:ASC|DESC))?", re.IGNORECASE)


def _list_order_flips(parsed: _Source, write: _Function) -> list[tuple[_Edit, str]]:
    """``self.xs.append(v)`` <-> ``self.xs.insert(0, v)`` in write(): newest first, or oldest first."""
    me = (write.args.posonlyargs + write.args.args)[0].arg
    flips = []
    for node in ast.walk(write):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        holder = node.func.value
        if not (isinstance(holder, ast.Attribute) and isinstance(holder.value, ast.Name) and holder.value.id == me):
            continue
        where = f"{me}.{holder.attr}"
        if node.func.attr == "append" and len(node.args) == 1 and not node.keywords:
            value = parsed.segment(node.args[0])
            text, what = f"{where}.insert(0, {value})", f"keep {where} newest first (insert at the front instead of appending)"
        elif node.func.attr == "insert" and len(node.args) == 2 and _is_zero(node.args[0]):
            value = parsed.segment(node.args[1])
            text, what = f"{where}.append({value})", f"keep {where} oldest first (append instead of inserting at the front)"
        else:
            continue
        start, end = parsed.span(node)
        flips.append((_Edit(start, end, text), what))
    return flips


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and type(node.value) is int


def _sql_order_flips(parsed: _Source, read: _Function) -> list[tuple[_Edit, str]]:
    """``ORDER BY col`` <-> ``ORDER BY col DESC`` in read()'s SQL, edited in the literal's own text."""
    flips = []
    for node in ast.walk(read):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        text = parsed.segment(node)
        match = _ORDER_BY.search(text)
        if match is None:
            continue
        descending = (match.group(2) or "").strip().upper() == "DESC"
        clause = match.group(1) + ("" if descending else " DESC")
        start = parsed.span(node)[0]
        edit = _Edit(start + match.start(), start + match.end(), clause)
        flips.append((edit, f"read stored rows {'oldest' if descending else 'newest'} first ({clause})"))
    return flips


def _sort_tie_flips(parsed: _Source, read: _Function) -> list[tuple[_Edit, str]]:
    """``sorted(xs, key=...)`` <-> ``sorted(reversed(xs), key=...)`` in read(): which entry wins a ranking tie."""
    flips = []
    for node in ast.walk(read):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "sorted" and node.args):
            continue
        ranked = node.args[0]
        if isinstance(ranked, (ast.Set, ast.SetComp, ast.Dict, ast.DictComp, ast.GeneratorExp)):
            continue  # no order to reverse
        start, end = parsed.span(ranked)
        inner = ranked.args[0] if _is_call_to(ranked, "reversed") else None
        if inner is not None:
            text, what = parsed.segment(inner), f"break ranking ties in read() oldest first (sorted({parsed.segment(inner)}))"
        else:
            text = f"reversed({parsed.segment(ranked)})"
            what = f"break ranking ties in read() newest first (sorted({text}))"
        flips.append((_Edit(start, end, text), what))
    return flips


def _is_call_to(node: ast.AST, name: str) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name and len(node.args) == 1


def order_by_recency(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Flip the order memory keeps or reads its entries in: newest first, or back to oldest first.

    Experience arrives in time order, so insertion order is recency. Ranking code usually breaks ties
    by that order (``sorted`` is stable, SQL returns rows in the order asked), and so does a task
    agent picking among equally matching lines; newest first makes an updated fact ("moved to
    Tallinn") win over the one it replaced. Applies to ``self.<list>.append(...)`` in write(), to
    ``ORDER BY`` clauses in read()'s SQL strings, and to what read() passes to ``sorted``
    (``reversed(...)``; a set or generator there has no order and is left alone).
    """
    parsed = _Source(source)
    cls = _module_class(parsed.tree, LOGIC_CLASS)
    methods = _methods(cls) if cls else {}
    flips = []
    if "write" in methods:
        flips += _list_order_flips(parsed, methods["write"])
    if "read" in methods:
        flips += _sql_order_flips(parsed, methods["read"]) + _sort_tie_flips(parsed, methods["read"])
    rng.shuffle(flips)
    for edit, description in flips:
        child = _apply(source, [edit])
        if _valid(source, child, avoid):
            return Mutation("order_by_recency", description, child)
    raise NoMutation("no list or SQL order to flip")
