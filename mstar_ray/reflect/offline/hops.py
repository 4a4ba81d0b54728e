"""``second_read``: a second read for the person a two-hop question names by a relation.

"Which car does the person who adopted Fennel drive now?" needs two statements: who adopted Fennel, and what
car that person drives now. One read with the question finds the first (it shares "Fennel" with it) and rarely
the second (it shares nothing but "car"). The paper's evolved programs issue a second query for the bridging
entity; this edit does the same over any program: ``read()`` becomes a helper method (``_read_hop``), and a new
``read()`` calls it with the query, takes the name the first result states beside what the question names (who
said the line that holds "Fennel", or a name written on it), calls it again with that name in place of the
question's own names, and returns the lines of both results, alternating, each once, within what ``read()``
may return (``READ_LIMIT`` characters, or the longer of the two if a read already returned more). A question without a relation word ("who", "whose", "owner") reads once, as
before. A ``read()`` that asks the toolkit model (itself or through what it calls) is not read twice: a second
read would ask it twice, and the contract allows one toolkit call per ``read()``.

The helpers go into the program as plain functions without imports; the second Query is built with the program's
own ``Query`` class, every ``str`` field about the name, the other fields as they were.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Collection

from mstar_ray.contract import LOGIC_CLASS
from mstar_ray.reflect.offline.engine import (
    READ_LIMIT, _Edit, Mutation, NoMutation, _apply, _bindings, _indent_of, _methods, _module_class, _Source, _valid,
)
from mstar_ray.reflect.offline.evidence import _reached
from mstar_ray.reflect.offline.lines import _returns
from mstar_ray.reflect.offline.writes import _constant_insertion

HOP = "_read_hop"
BRIDGE = "bridging_name"
REQUERY = "about_name"
MERGE = "alternate_lines"

_HELPERS = f'''# A question naming someone by a relation ("the person who adopted Fennel") is read twice: once to find who
# that is, once for what is asked about them. A question holding one of these words names someone so.
RELATION_WORDS = ("who", "whose", "owner")
# Both reads together stay within what read() may return.
SECOND_READ_CHARS = {READ_LIMIT}


def {BRIDGE}(found, asked):
    """The name stated beside what the question names: the speaker of a line holding one of the question's
    names ("Olivia: we adopted Fennel"), else a capitalised word inside such a line."""
    words = [w.strip("?.,!:;'\\"()[]") for w in asked.split()]
    lowered = {{w.lower() for w in words}}
    if not lowered & set(RELATION_WORDS):
        return ""
    named = [w for w in words[1:] if w[:1].isupper() and len(w) > 1]
    counts = {{}}
    for line in found.split("\\n"):
        if not any(n in line for n in named):
            continue
        body = line.split("] ", 1)[-1]
        head, sep, rest = body.partition(": ")
        if sep and head[:1].isupper() and len(head.split()) <= 3 and head.lower() not in lowered:
            counts[head] = counts.get(head, 0) + 2
        tokens = (rest if sep else body).split()
        for before, word in zip([""] + tokens, tokens):
            w = word.strip("?.,!:;'\\"()[]")
            if (len(w) > 1 and w[0].isupper() and w[1:].islower() and w.lower() not in lowered
                    and before and before[-1] not in ".!?"):
                counts[w] = counts.get(w, 0) + 1
    return max(sorted(counts), key=lambda w: counts[w]) if counts else ""


def {REQUERY}(text, name):
    """A query's text about ``name``: the question's own names (capitalised words after its first) replaced by it."""
    words = text.split()
    return " ".join([name] + [w for i, w in enumerate(words) if i == 0 or not w[:1].isupper()])


def {MERGE}(first, second):
    """The lines of both reads, alternating, each once, within what read() may return."""
    limit = max(len(first), len(second), min(len(first) + len(second) + 1, SECOND_READ_CHARS))
    out, seen, size = [], set(), 0
    a, b = first.split("\\n"), second.split("\\n")
    for i in range(max(len(a), len(b))):
        for line in (a[i] if i < len(a) else None, b[i] if i < len(b) else None):
            if line is None or (line.strip() and line in seen):
                continue
            if size + len(line) + 1 > limit:
                return "\\n".join(out)
            seen.add(line)
            out.append(line)
            size += len(line) + 1
    return "\\n".join(out)
'''


def _asks_model(tree: ast.Module) -> bool:
    """Whether read(), or a method or function it reaches, calls the toolkit's model."""
    return any(isinstance(node, ast.Attribute) and node.attr == "llm_completion"
               for fn in _reached(tree) for node in ast.walk(fn))


def second_read(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Make ``read()`` read a second time for the person a question names by a relation (once per program)."""
    parsed = _Source(source)
    cls = _module_class(parsed.tree, LOGIC_CLASS)
    methods = _methods(cls) if cls else {}
    read = methods.get("read")
    if read is None or not isinstance(read, ast.FunctionDef):
        raise NoMutation("the program has no read() to repeat")
    if HOP in methods or {BRIDGE, REQUERY, MERGE, "SECOND_READ_CHARS"} & set(_bindings(parsed.tree)):
        raise NoMutation("read() already reads a second time")
    if _asks_model(parsed.tree):
        raise NoMutation("read() asks the toolkit model: a second read would ask it again, over its one call")
    if not any(r.value is not None and not isinstance(r.value, ast.Constant) for r in _returns(read)):
        raise NoMutation("read() returns nothing but literals: a second read would find nothing more")
    params = read.args.args
    if len(params) != 2 or read.args.vararg or read.args.kwarg or read.args.kwonlyargs:
        raise NoMutation("read() does not take (self, query)")
    me, query = params[0].arg, params[1].arg
    schema = _module_class(parsed.tree, "Query")
    fields = [(stmt.target.id, isinstance(stmt.annotation, ast.Name) and stmt.annotation.id == "str")
              for stmt in (schema.body if schema else []) if isinstance(stmt, ast.AnnAssign)
              and isinstance(stmt.target, ast.Name)]
    texts = [f"{query}.{name}" for name, is_text in fields if is_text]
    if not texts:
        raise NoMutation("the Query has no text field to ask about a name")
    again = ", ".join(f"{name}={REQUERY}({query}.{name}, name)" if is_text else f"{name}={query}.{name}"
                      for name, is_text in fields)
    indent = _indent_of(parsed, read)
    body = indent + "    "
    # The def line names the method: rename it in place, keep its decorators, signature and body.
    line_start = parsed.line_starts[read.lineno - 1]
    name_at = parsed.text.index("def read", line_start) + len("def ")
    rename = _Edit(name_at, name_at + len("read"), HOP)
    wrapper = (
        f"\n{indent}def read({me}, {query}):\n"
        f"{body}first = {me}.{HOP}({query})\n"
        f"{body}name = {BRIDGE}(first, \" \".join([{', '.join(texts)}]))\n"
        f"{body}if not name:\n"
        f"{body}    return first\n"
        f"{body}return {MERGE}(first, {me}.{HOP}(Query({again})))\n"
    )
    end = parsed.line_end(read.end_lineno or read.lineno)
    child = _apply(source, [rename, _Edit(end, end, wrapper), _constant_insertion(parsed, _HELPERS)])
    if not _valid(source, child, avoid):
        raise NoMutation("a second read gives no new valid program")
    return Mutation("second_read", "read() reads a second time for the person a question names by a relation "
                    "(who/whose/owner): the name stated beside the question's own names, in their place", child)
