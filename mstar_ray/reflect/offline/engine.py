"""The edit engine every mutation uses: a mutation's result, text edits at exact AST spans (comments and
formatting elsewhere survive), the checks a child must pass, and the AST lookups several kinds share.

Names with a leading underscore are private to ``mstar_ray.reflect.offline``.
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from mstar_ray.contract import LOGIC_CLASS, check_source
from mstar_ray.program_ast import is_docstring
from mstar_ray.reflect.offline.names import _bound_names, _free_names


# read() may return at most this many characters (the contract); limits on it never go above.
READ_LIMIT = 3000
# Wide enough that one step can matter (a top-5 retriever barely changes at top-8).
SCALE_FACTORS = (0.25, 0.5, 0.75, 1.5, 2.0, 4.0)
# A constant whose name says it bounds what read() returns is kept within READ_LIMIT.
_READ_BOUND_NAME = re.compile(r"CONTEXT|READ|OUTPUT|RESULT|RETURN")
_TUNABLE_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_LINE_WIDTH = 110
T = TypeVar("T")
_Function = ast.FunctionDef | ast.AsyncFunctionDef  # a program's method or helper, either kind


@dataclass(frozen=True)
class Mutation:
    kind: str
    description: str
    source: str


class NoMutation(ValueError):
    """No mutation of the requested kinds applies to the program."""


# Where the offline reflector's commit message says why it chose the change.
WHY = " (why: "


def what_changed(message: str) -> str:
    """A commit message without why, on one line: the change itself."""
    return " ".join(message.split(WHY, 1)[0].split())


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str


class _Source:
    """A program's text and syntax tree, with character offsets for AST positions.

    AST columns count UTF-8 bytes; offsets here count characters, so non-ASCII text stays intact.
    """

    def __init__(self, text: str):
        self.text = text
        self.tree = ast.parse(text)
        self.lines = text.splitlines(keepends=True)
        self.line_starts = [0]
        for line in self.lines:
            self.line_starts.append(self.line_starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1]
        return self.line_starts[lineno - 1] + len(line.encode()[:col].decode(errors="ignore"))

    def span(self, node: ast.expr | ast.stmt) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(_end_line(node), _end_column(node))

    def segment(self, node: ast.expr | ast.stmt) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def block_span(self, node: ast.stmt) -> tuple[int, int]:
        """Whole lines of a statement, decorators included, up to the start of the next line."""
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        return self.line_starts[first - 1], self.line_starts[_end_line(node)]

    def block(self, node: ast.stmt) -> str:
        start, end = self.block_span(node)
        text = self.text[start:end]
        return text if text.endswith("\n") else text + "\n"

    def line_end(self, lineno: int) -> int:
        return self.line_starts[lineno]


def _apply(source: str, edits: Iterable[_Edit]) -> str:
    """Apply non-overlapping edits; an insertion at the same offset as a replacement goes before it."""
    ordered = sorted(edits, key=lambda e: (e.start, e.end > e.start))
    for before, after in zip(ordered, ordered[1:]):
        if before.end > after.start:
            raise ValueError("overlapping edits")
    for edit in reversed(ordered):
        text = edit.text
        if edit.start == len(source) and source and not source.endswith("\n"):
            text = "\n" + text  # appending after a last line that has no newline
        source = source[: edit.start] + text + source[edit.end :]
    return source


def _indent_of(source: _Source, node: ast.stmt) -> str:
    line = source.lines[node.lineno - 1]
    return line[: len(line) - len(line.lstrip())]


def _reindent(block: str, old: str, new: str) -> str | None:
    """Move a block from indentation ``old`` to ``new``; None if a line sits left of ``old``."""
    if old == new:
        return block
    out = []
    for line in block.splitlines(keepends=True):
        if not line.strip():
            out.append(line)
        elif line.startswith(old):
            out.append(new + line[len(old) :])
        else:
            return None  # e.g. a multi-line string flush left: moving it would change its value
    return "".join(out)


def _valid(parent: str, child: str, avoid: Collection[str] = ()) -> bool:
    """A child is kept only if it is new (not the parent, not in ``avoid``), compiles, passes the
    contract and reads no undefined name."""
    if child == parent or child in avoid:
        return False
    try:
        tree = ast.parse(child)
        compile(tree, "program.py", "exec")
    except (SyntaxError, ValueError):
        return False
    return not check_source(child) and not _free_names(tree)


def changes_one(helper_source: str, name: str, contexts: Sequence[str], *, entries: str | None = None) -> bool:
    """Whether the helper ``name`` an edit puts into a child would change one of ``contexts`` (read()'s text as
    the reflector was shown it), as a reader of the traces would try a filter on them before proposing it.
    ``helper_source`` is this package's own text, the very one the child gets (one copy of its rule), never a
    program's. The texts are compared as lines, or as the entries the helper ``entries`` of the same source
    splits them into (a filter that joins what it keeps by blank lines changes separators, not content)."""
    namespace: dict[str, Any] = {}
    exec(compile(helper_source, f"<{name}>", "exec"), namespace)
    helper = namespace[name]
    split: Callable[[str], list[str]] = namespace[entries] if entries else str.splitlines
    return any(split(helper(context)) != split(context) for context in contexts if context.strip())


def _short_id(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()[:4]


def _module_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == name), None)


def _methods(cls: ast.ClassDef) -> dict[str, _Function]:
    return {s.name: s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _code_functions(tree: ast.Module) -> list[tuple[str, _Function]]:
    """(label, function) for the KnowledgeBase methods and the module-level helpers: the program's code."""
    found: list[tuple[str, _Function]] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((f"{stmt.name}()", stmt))
        elif isinstance(stmt, ast.ClassDef) and stmt.name == LOGIC_CLASS:
            found.extend((f"{name}()", fn) for name, fn in _methods(stmt).items())
    return found


def _weighted_shuffle(items: Sequence[T], weights: Sequence[float], rng: random.Random) -> list[T]:
    """All ``items`` in a random order in which heavier ones tend to come first."""
    left = list(zip(items, weights))
    order = []
    while left:
        pick = rng.choices(range(len(left)), weights=[w for _, w in left])[0]
        order.append(left.pop(pick)[0])
    return order


def _first_statement(fn: _Function) -> ast.stmt | None:
    """The first statement after the docstring, if it starts on its own line."""
    body = fn.body[1:] if fn.body and is_docstring(fn.body[0]) and len(fn.body) > 1 else fn.body
    first = body[0] if body else None
    return first if first is not None and first.lineno > fn.lineno else None


def _number(node: ast.AST | None) -> ast.Constant | None:
    """A positive int/float literal (never a bool), unwrapping a unary minus (a ``[-5:]`` slice)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool) \
            and node.value > 0:
        return node
    return None


def _constant_target(stmt: ast.stmt) -> str | None:
    """The name of an UPPER_CASE module constant holding a positive number, else None."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, ast.AnnAssign):
        target = stmt.target
    else:
        return None
    if isinstance(target, ast.Name) and _TUNABLE_NAME.match(target.id) and _number(stmt.value) is stmt.value:
        return target.id
    return None


def _constant_number(stmt: ast.stmt) -> ast.Constant | None:
    """The number an UPPER_CASE module constant holds (where ``_constant_target`` names one), else None."""
    if _constant_target(stmt) is None or not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        return None
    return _number(stmt.value)


def _method_attributes(fn: _Function) -> tuple[set[str], set[str]]:
    """(attributes of self the method assigns, attributes it reads)."""
    params = fn.args.posonlyargs + fn.args.args
    if not params:
        return set(), set()
    me = params[0].arg
    assigned: set[str] = set()
    loaded: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == me:
            (loaded if isinstance(node.ctx, ast.Load) else assigned).add(node.attr)
    return assigned, loaded


def _bindings(tree: ast.Module) -> dict[str, ast.stmt]:
    """Module-level name -> the statement binding it (the first one)."""
    found: dict[str, ast.stmt] = {}
    for stmt in tree.body:
        for name in sorted(_bound_names(stmt)):
            found.setdefault(name, stmt)
    return found


def _end_line(node: ast.expr | ast.stmt) -> int:
    """A parsed node's last line (only a node built by hand has none, and no edit spans one)."""
    if node.end_lineno is None:
        raise ValueError(f"{type(node).__name__} at line {node.lineno} has no end position: it was not parsed")
    return node.end_lineno


def _end_column(node: ast.expr | ast.stmt) -> int:
    if node.end_col_offset is None:
        raise ValueError(f"{type(node).__name__} at line {node.lineno} has no end position: it was not parsed")
    return node.end_col_offset


def _comment_start(source: _Source, stmt: ast.stmt) -> int:
    """The first line of the comment lines directly above a statement (its own first line if none)."""
    decorators: list[ast.expr] = getattr(stmt, "decorator_list", [])
    first = min([stmt.lineno] + [d.lineno for d in decorators])
    while first > 1 and source.lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return first
