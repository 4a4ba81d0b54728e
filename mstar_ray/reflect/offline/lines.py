"""``drop_long_lines``: leave the long lines out of what ``read()`` returns, before the slice that caps it.

A bounded ``read()`` fills its characters in the order it ranks its entries, and one long line can take the
room of many short, specific ones: an expert transcript's first observation (a whole room described in about
100 words) beside its ACTION lines of 3 to 8, a monologue beside the turns that answer. The child gets a module
constant ``MAX_LINE_WORDS`` (``perturb_numbers`` tunes it afterwards) and a helper that every value ``read()``
returns passes through; where a return is capped by a slice, the helper goes inside it, so the cap then fills
with short lines.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Collection, Iterator, Sequence

from mstar_ray.contract import LOGIC_CLASS
from mstar_ray.reflect.offline.engine import (
    _Edit, Mutation, NoMutation, _Source, _apply, _bindings, _methods, _module_class, _valid,
)
from mstar_ray.reflect.offline.engine import _Function, changes_one
from mstar_ray.reflect.offline.writes import _constant_insertion

MAX_LINE_WORDS_NAME = "MAX_LINE_WORDS"
# Above a dialogue turn or an action, below a room's description or a pasted page.
MAX_LINE_WORDS = 40
HELPER = "short_lines"
_HELPER_SOURCE = (f"# Lines of read()'s text with more words than this are left out: one long passage would take the "
                  f"room of many\n# short, specific lines.\n{MAX_LINE_WORDS_NAME} = {MAX_LINE_WORDS}\n\n\n"
                  f"def {HELPER}(text):\n"
                  f'    return "\\n".join(line for line in text.split("\\n") if len(line.split()) <= {MAX_LINE_WORDS_NAME})\n')


def drops_from(contexts: Sequence[str]) -> bool:
    """Whether the child's filter would leave a line out of one of these contexts (read()'s text as the reflector
    was shown it): where it leaves none, the failures cannot come from long lines."""
    return changes_one(_HELPER_SOURCE, HELPER, contexts)


def _returns(fn: _Function) -> Iterator[ast.Return]:
    """The function's own return statements (not those of functions defined inside it)."""
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _wrapped(parsed: _Source, value: ast.expr, helper: str = HELPER, extra: str = "") -> _Edit | None:
    """The edit passing ``value`` (or, for ``x[:cap]``, ``x``) through ``helper`` (``extra``: its further
    arguments, e.g. ``", query"``); None for a literal."""
    target = value
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice) and value.slice.lower is None \
            and value.slice.upper is not None and value.slice.step is None:
        target = value.value
    if isinstance(target, ast.Constant):
        return None  # return "" has no line to drop
    start, end = parsed.span(target)
    return _Edit(start, end, f"{helper}({parsed.segment(target)}{extra})")


def drop_long_lines(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Make ``read()`` leave out lines of more than ``MAX_LINE_WORDS`` words (once per program)."""
    parsed = _Source(source)
    cls = _module_class(parsed.tree, LOGIC_CLASS)
    read = _methods(cls).get("read") if cls else None
    if read is None:
        raise NoMutation("the program has no read() to filter")
    if {MAX_LINE_WORDS_NAME, HELPER} & set(_bindings(parsed.tree)):
        raise NoMutation("read() already leaves long lines out")
    edits = [edit for node in _returns(read) if node.value is not None and (edit := _wrapped(parsed, node.value))]
    if not edits:
        raise NoMutation("read() returns nothing but literals")
    child = _apply(source, [_constant_insertion(parsed, _HELPER_SOURCE), *edits])
    if not _valid(source, child, avoid):
        raise NoMutation("leaving long lines out of read() gives no new valid program")
    return Mutation("drop_long_lines", f"leave lines of more than {MAX_LINE_WORDS_NAME} = {MAX_LINE_WORDS} words out of "
                    "read()'s text, before its cap (long passages crowd short, specific lines out)", child)
