"""The offline reflector: generic, source-to-source mutations of a memory program.

With the ``offline`` backend there is no reflector LLM to write patches, yet the search must still
produce children that can score better than their parents. Each mutation here reads the program's
syntax tree only to find *where* to edit, then edits the original text at exact line/column spans:
comments and formatting elsewhere survive, and a child differs from its parent by a small readable
diff, described by a commit-message-like ``Mutation.description``.

Kinds (each a function ``kind(source, rng, *, avoid=())``, ``crossover`` also taking the donor's
source; deterministic given the generator; ``avoid`` lists programs a child must not equal):

- ``perturb_numbers``: scale one numeric tunable (an UPPER_CASE module constant, or an int literal
  used as a slice bound, keyword argument, comparison threshold or default inside the code).
- ``crossover``: take a consistent unit (methods, the whole ``KnowledgeBase``, a helper function, a
  schema dataclass or a constant's value) from another program of the population.
- ``edit_instruction``: add or drop one generic guidance sentence in an instruction constant.
- ``filter_writes``: stop ``write()`` from storing small talk (turns too short to hold a fact) or
  repeats (turns already stored word for word); both crowd facts out of a bounded ``read()``.
- ``order_by_recency``: flip whether memory keeps/returns the newest or the oldest entry first, which
  decides ties in favour of updated facts ("what does X do *now*").

``propose`` picks a kind at random, honours the ablation switches, falls back to other kinds when one
does not apply, and never returns a program already in the population. Every program returned
passes ``check_source``, compiles, reads no undefined name and differs from its parent; otherwise
``NoMutation`` is raised.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import json
import random
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from mstar_ray.contract import LOGIC_CLASS, REQUIRED_CONSTANTS, SCHEMA_CLASSES, check_source
from mstar_ray.program_ast import is_docstring

# read() may return at most this many characters (the contract); limits on it never go above.
READ_LIMIT = 3000
# Wide enough that one step can matter (a top-5 retriever barely changes at top-8).
SCALE_FACTORS = (0.25, 0.5, 0.75, 1.5, 2.0, 4.0)
# A constant whose name says it bounds what read() returns is kept within READ_LIMIT.
_READ_BOUND_NAME = re.compile(r"CONTEXT|READ|OUTPUT|RESULT|RETURN")
_TUNABLE_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_LINE_WIDTH = 110
_BUILTIN_NAMES = frozenset(dir(builtins))
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
T = TypeVar("T")


@dataclass(frozen=True)
class Mutation:
    kind: str
    description: str
    source: str


class NoMutation(ValueError):
    """No mutation of the requested kinds applies to the program."""


# --------------------------------------------------------------------------------------------------
# Text editing at AST positions
# --------------------------------------------------------------------------------------------------


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

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def block_span(self, node: ast.stmt) -> tuple[int, int]:
        """Whole lines of a statement, decorators included, up to the start of the next line."""
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        return self.line_starts[first - 1], self.line_starts[node.end_lineno]

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


# --------------------------------------------------------------------------------------------------
# Names: what a piece of code reads without binding it
# --------------------------------------------------------------------------------------------------


def _scan(scope: ast.AST) -> tuple[set[str], set[str], list[ast.AST]]:
    """(names bound, names read, nested scopes) of one scope, not descending into nested scopes."""
    bound: set[str] = set()
    loaded: set[str] = set()
    nested: list[ast.AST] = []
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = scope.args
        bound |= {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        bound |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        stack: list[ast.AST] = [scope.body] if isinstance(scope, ast.Lambda) else list(scope.body)
    else:
        stack = list(getattr(scope, "body", []))
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            nested.append(node)
            if not isinstance(node, ast.Lambda):
                bound.add(node.name)
            # Decorators, defaults, annotations and bases are evaluated in the enclosing scope.
            stack.extend(getattr(node, "decorator_list", []) + getattr(node, "bases", []))
            stack.extend(k.value for k in getattr(node, "keywords", []))
            if not isinstance(node, ast.ClassDef):
                stack.extend(node.args.defaults + [d for d in node.args.kw_defaults if d is not None])
                every = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                stack.extend(a.annotation for a in every if a.annotation is not None)
                if getattr(node, "returns", None) is not None:
                    stack.append(node.returns)
            continue
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound |= set(node.names)
        stack.extend(ast.iter_child_nodes(node))
    return bound, loaded, nested


def _free_names(scope: ast.AST) -> set[str]:
    """Names read in ``scope`` (and scopes nested in it) that it does not bind; builtins excluded."""
    bound, loaded, nested = _scan(scope)
    free = loaded - bound
    for child in nested:
        inner = _free_names(child)
        # Methods do not see names bound in their class body, only the module's.
        free |= inner if isinstance(scope, ast.ClassDef) else inner - bound
    return free - _BUILTIN_NAMES


def _free_names_of(nodes: Sequence[ast.stmt]) -> set[str]:
    return _free_names(ast.Module(body=list(nodes), type_ignores=[]))


def _bound_names(stmt: ast.stmt) -> set[str]:
    return _scan(ast.Module(body=[stmt], type_ignores=[]))[0]


# --------------------------------------------------------------------------------------------------
# Validity of a result
# --------------------------------------------------------------------------------------------------


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


def _short_id(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()[:4]


def _module_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == name), None)


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {s.name: s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _code_functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef]]:
    """(label, function) for the KnowledgeBase methods and the module-level helpers: the program's code."""
    found: list[tuple[str, ast.FunctionDef]] = []
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


def _first_statement(fn: ast.FunctionDef) -> ast.stmt | None:
    """The first statement after the docstring, if it starts on its own line."""
    body = fn.body[1:] if fn.body and is_docstring(fn.body[0]) and len(fn.body) > 1 else fn.body
    first = body[0] if body else None
    return first if first is not None and first.lineno > fn.lineno else None


# --------------------------------------------------------------------------------------------------
# 1. perturb_numbers
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tunable:
    node: ast.Constant
    label: str
    at_least: int  # smallest allowed value (ints)
    at_most: float | None


def _number(node: ast.AST | None) -> ast.Constant | None:
    """A positive int/float literal (never a bool), unwrapping a unary minus (a ``[-5:]`` slice)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value > 0:
        return node
    return None


@dataclass(frozen=True)
class _ReadCaps:
    """What slices read()'s return value: literal nodes (by id) and constant names. They cap its output."""

    nodes: frozenset[int]
    names: frozenset[str]


def _read_caps(tree: ast.Module) -> _ReadCaps:
    cls = _module_class(tree, LOGIC_CLASS)
    read = _methods(cls).get("read") if cls else None
    bounds = []
    for node in ast.walk(read) if read else []:
        if isinstance(node, ast.Return) and node.value is not None:
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Slice) and sub.slice.upper:
                    bounds.append(sub.slice.upper)
    return _ReadCaps(frozenset(id(b) for b in bounds), frozenset(b.id for b in bounds if isinstance(b, ast.Name)))



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


def _module_tunables(tree: ast.Module, caps: _ReadCaps) -> list[_Tunable]:
    found = []
    for stmt in tree.body:
        name = _constant_target(stmt)
        if name is not None:
            bounds_read = _READ_BOUND_NAME.search(name) or name in caps.names
            found.append(_Tunable(stmt.value, name, 1, READ_LIMIT if bounds_read else None))
    return found


def _literal_roles(fn: ast.FunctionDef) -> Iterable[tuple[ast.AST, str]]:
    """(literal, role) for the int literals in a function that act as sizes, counts or thresholds."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Slice):
            yield from ((bound, "slice bound") for bound in (node.lower, node.upper, node.step))
        elif isinstance(node, ast.keyword) and node.arg:
            yield node.value, f"{node.arg}= argument"
        elif isinstance(node, ast.Compare):
            yield from ((side, "threshold") for side in [node.left, *node.comparators])
        elif isinstance(node, ast.Call):
            func = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if func in ("min", "max", "nlargest", "nsmallest", "most_common"):
                yield from ((arg, f"argument of {func}()") for arg in node.args)
    args = fn.args
    positional = args.posonlyargs + args.args
    for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults):
        yield default, f"default of {arg.arg}"
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        yield default, f"default of {arg.arg}"


def _code_tunables(tree: ast.Module, caps: _ReadCaps) -> list[_Tunable]:
    found, seen = [], set()
    for where, fn in _code_functions(tree):
        for literal, role in _literal_roles(fn):
            node = _number(literal)
            # 0 and 1 are indices and steps, not sizes; floats inside code are rarely knobs.
            if node is None or type(node.value) is not int or node.value < 2 or id(node) in seen:
                continue
            seen.add(id(node))
            cap = READ_LIMIT if id(literal) in caps.nodes else None
            found.append(_Tunable(node, f"the {role} in {where} (line {node.lineno})", 1, cap))
    return found


def _new_values(tunable: _Tunable, rng: random.Random) -> list[int | float]:
    """The values a tunable may take next, in random order: scaled by each factor, and for a small
    int also one up or down (scaling 6 gives 3, 4, 5, 9...; never 7)."""
    value = tunable.node.value
    if isinstance(value, int):
        found = [max(tunable.at_least, round(value * f)) for f in SCALE_FACTORS]
        if value < 10:
            found += [value - 1, value + 1]
        found = [max(tunable.at_least, v) for v in found]
    else:
        found = [float(f"{value * f:.4g}") for f in SCALE_FACTORS]
        if value <= 1.0:
            found = [min(v, 1.0) for v in found]  # a fraction or a similarity threshold stays one
    if tunable.at_most is not None:
        found = [min(v, type(value)(tunable.at_most)) for v in found]
    distinct = sorted(set(found) - {value})
    rng.shuffle(distinct)
    return distinct


def _draw_weight(tunable: _Tunable, named: bool) -> float:
    """Named constants are the program's declared knobs: twice as likely as a bare literal. A limit
    already at its cap can only shrink what read() returns, which rarely helps: a quarter as likely."""
    weight = 2.0 if named else 1.0
    return weight / 4 if tunable.at_most is not None and tunable.node.value >= tunable.at_most else weight


def perturb_numbers(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Scale one numeric tunable by a factor from ``SCALE_FACTORS`` (or move a small int by one).

    Tunables are UPPER_CASE int/float module constants and the int literals (>= 2) that serve as
    slice bounds, keyword arguments (``n_results=5``), comparison thresholds, ``min``/``max``/
    ``nlargest`` arguments or parameter defaults in the code. Booleans, 0/1 and anything inside a
    string are never touched. Ints stay ints >= 1; a bound on what ``read()`` returns (by its name, or
    because it slices read()'s return value) stays <= 3000, the contract's limit; a float <= 1 (a
    fraction or a similarity threshold) stays <= 1.
    """
    parsed = _Source(source)
    caps = _read_caps(parsed.tree)
    named, literals = _module_tunables(parsed.tree, caps), _code_tunables(parsed.tree, caps)
    weights = [_draw_weight(t, True) for t in named] + [_draw_weight(t, False) for t in literals]
    for tunable in _weighted_shuffle(named + literals, weights, rng):
        for new in _new_values(tunable, rng):
            start, end = parsed.span(tunable.node)
            child = _apply(source, [_Edit(start, end, repr(new))])
            if _valid(source, child, avoid):
                verb = "raise" if new > tunable.node.value else "lower"
                return Mutation("perturb_numbers", f"{verb} {tunable.label} from {tunable.node.value} to {new}", child)
    raise NoMutation("no numeric tunable to perturb")


# --------------------------------------------------------------------------------------------------
# 2. crossover
# --------------------------------------------------------------------------------------------------


def _method_attributes(fn: ast.FunctionDef) -> tuple[set[str], set[str]]:
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


def _class_level_names(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for stmt in cls.body:
        names |= _bound_names(stmt)
    return names


def _attribute_use(methods: dict[str, ast.FunctionDef], class_names: set[str]) -> tuple[set[str], set[str]]:
    """(attributes set or defined in the class, attributes read) over a class's methods."""
    assigned, loaded = set(class_names) | set(methods), set()
    for fn in methods.values():
        a, r = _method_attributes(fn)
        assigned |= a
        loaded |= r
    return assigned, loaded


def _missing_attributes(methods: dict[str, ast.FunctionDef], class_names: set[str]) -> set[str]:
    assigned, loaded = _attribute_use(methods, class_names)
    return loaded - assigned


def _unread_attributes(methods: dict[str, ast.FunctionDef], class_names: set[str]) -> set[str]:
    assigned, loaded = _attribute_use(methods, class_names)
    return assigned - loaded - set(methods) - class_names


def _schema_uses(tree: ast.Module) -> dict[str, set[str]]:
    """Fields of KnowledgeItem/Query the code reads: through write's item, read's query, annotated params."""
    uses: dict[str, set[str]] = {name: set() for name in SCHEMA_CLASSES}
    positional = {"write": "KnowledgeItem", "read": "Query"}
    cls = _module_class(tree, LOGIC_CLASS)
    for _, fn in _code_functions(tree):
        params = fn.args.posonlyargs + fn.args.args
        typed: dict[str, str] = {}
        for arg in params + fn.args.kwonlyargs:
            if isinstance(arg.annotation, ast.Name) and arg.annotation.id in uses:
                typed[arg.arg] = arg.annotation.id
        is_method = cls is not None and fn in cls.body
        if is_method and fn.name in positional and len(params) > 1:
            typed.setdefault(params[1].arg, positional[fn.name])
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in typed:
                uses[typed[node.value.id]].add(node.attr)
    return uses


def _schema_fields(tree: ast.Module, name: str) -> set[str]:
    cls = _module_class(tree, name)
    body = cls.body if cls else []
    return {s.target.id for s in body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}


def _consistent(source: str) -> bool:
    """The KnowledgeBase reads only attributes it sets, and only schema fields that exist."""
    tree = ast.parse(source)
    cls = _module_class(tree, LOGIC_CLASS)
    if cls is None or _missing_attributes(_methods(cls), _class_level_names(cls)):
        return False
    return all(used <= _schema_fields(tree, name) for name, used in _schema_uses(tree).items())


def _bindings(tree: ast.Module) -> dict[str, ast.stmt]:
    """Module-level name -> the statement binding it (the first one)."""
    found: dict[str, ast.stmt] = {}
    for stmt in tree.body:
        for name in sorted(_bound_names(stmt)):
            found.setdefault(name, stmt)
    return found


def _same_kind(a: ast.stmt, b: ast.stmt) -> bool:
    """Whether code written against one binding works with the other (same kind; same arity for functions)."""
    if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef)) and isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return len(a.args.args) == len(b.args.args)
    groups = ((ast.Import, ast.ImportFrom), (ast.Assign, ast.AnnAssign), (ast.ClassDef,))
    return any(isinstance(a, g) and isinstance(b, g) for g in groups)


def _import_line(stmt: ast.Import | ast.ImportFrom, name: str) -> str:
    alias = next(a for a in stmt.names if (a.asname or a.name).split(".")[0] == name)
    spelled = alias.name + (f" as {alias.asname}" if alias.asname else "")
    if isinstance(stmt, ast.ImportFrom):
        return f"from {stmt.module} import {spelled}\n"
    return f"import {spelled}\n"


def _comment_start(source: _Source, stmt: ast.stmt) -> int:
    """The first line of the comment lines directly above a statement (its own first line if none)."""
    first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    while first > 1 and source.lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return first


def _leading_comments(source: _Source, stmt: ast.stmt) -> str:
    """Comment lines directly above a statement: they explain it, so they travel with it."""
    start = source.line_starts[_comment_start(source, stmt) - 1]
    return source.text[start : source.block_span(stmt)[0]]


class _Transplant:
    """Build a child from the receiver by taking nodes from a donor, with what those nodes need.

    Replaced nodes keep their place; added methods go to the end of the receiver's class. Module-level
    definitions the taken code needs and the receiver lacks are carried over, recursively: imports
    after the receiver's imports, constants after its constants, helper functions and classes just
    before the first edited module-level statement, so each exists before anything using it at
    import time.
    """

    def __init__(self, receiver: _Source, donor: _Source):
        self.receiver = receiver
        self.donor = donor
        self.edits: list[_Edit] = []
        self.taken: list[ast.stmt] = []  # donor statements (module-level or methods) now in the child
        self.removed: set[str] = set()  # module-level names of the receiver's replaced statements
        self.provided: set[str] = set()  # module-level names of the donor's statements taken
        self.anchor: int | None = None  # offset of the first edited module-level statement
        self.carried: list[str] = []

    def _mark(self, module_stmt: ast.stmt) -> None:
        start = self.receiver.block_span(module_stmt)[0]
        self.anchor = start if self.anchor is None else min(self.anchor, start)

    def replace(self, old: ast.stmt, new: ast.stmt, module_stmt: ast.stmt) -> bool:
        block = _reindent(self.donor.block(new), _indent_of(self.donor, new), _indent_of(self.receiver, old))
        if block is None:
            return False
        start, end = self.receiver.block_span(old)
        if not self.receiver.text[start:end].endswith("\n"):
            block = block.rstrip("\n")  # the receiver's last line had no newline: keep it that way
        self.edits.append(_Edit(start, end, block))
        self.taken.append(new)
        if old is module_stmt:
            self.removed |= _bound_names(old)
            self.provided |= _bound_names(new)
        self._mark(module_stmt)
        return True

    def add_method(self, cls: ast.ClassDef, donor_cls: ast.ClassDef, new: ast.stmt) -> bool:
        indent = _indent_of(self.receiver, cls.body[-1])
        block = _reindent(self.donor.block(new), _indent_of(self.donor, new), indent)
        if block is None:
            return False
        self.edits.append(_Edit(self.receiver.line_end(cls.end_lineno), self.receiver.line_end(cls.end_lineno), "\n" + block))
        self.taken.append(new)
        self._mark(cls)
        return True

    def carry_dependencies(self) -> bool:
        """Carry the donor's module-level definitions the taken code needs; False if one conflicts."""
        have = _bindings(self.receiver.tree)
        give = _bindings(self.donor.tree)
        for name in self.removed:
            have.pop(name, None)
        have.update({name: give[name] for name in self.provided})
        needed = sorted(_free_names_of(self.taken))
        imports, others = [], []
        while needed:
            name = needed.pop(0)
            if name in have:
                if name in give and not _same_kind(have[name], give[name]):
                    return False
                continue
            stmt = give.get(name)
            if stmt is None:
                return False
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                imports.append(_import_line(stmt, name))
                have[name] = stmt
                continue
            have.update(dict.fromkeys(_bound_names(stmt), stmt))
            others.append(stmt)
            self.carried.append(name)
            needed.extend(sorted(_free_names_of([stmt])))
        self._insert_imports(imports)
        self._insert_definitions(sorted(others, key=lambda s: s.lineno))
        return True

    def _insert_imports(self, lines: list[str]) -> None:
        if not lines:
            return
        body = self.receiver.tree.body
        last = max((s for s in body if isinstance(s, (ast.Import, ast.ImportFrom))), key=lambda s: s.end_lineno, default=None)
        if last is None:
            last = body[0] if body and is_docstring(body[0]) else None
        offset = self.receiver.line_end(last.end_lineno) if last else 0
        self.edits.append(_Edit(offset, offset, "".join(sorted(set(lines)))))
        self.carried.extend(line.split()[-1] for line in sorted(set(lines)))

    def _insert_definitions(self, stmts: list[ast.stmt]) -> None:
        """Constants join the receiver's constants; functions and classes go just before the anchor."""
        anchor = self.anchor if self.anchor is not None else len(self.receiver.text)
        assignments = [s for s in stmts if isinstance(s, (ast.Assign, ast.AnnAssign))]
        definitions = [s for s in stmts if s not in assignments]
        if assignments:
            text = "".join(_leading_comments(self.donor, s) + self.donor.block(s) for s in assignments)
            before = [
                s
                for s in self.receiver.tree.body
                if isinstance(s, (ast.Assign, ast.AnnAssign)) and self.receiver.block_span(s)[1] <= anchor
            ]
            at = self.receiver.block_span(before[-1])[1] if before else anchor
            self.edits.append(_Edit(at, at, text if before else text + "\n\n"))
        if definitions:
            text = "\n\n".join(_leading_comments(self.donor, s) + self.donor.block(s) for s in definitions)
            self.edits.append(_Edit(anchor, anchor, text + "\n\n"))

    def result(self) -> str:
        return _apply(self.receiver.text, self.edits)

    def carried_note(self) -> str:
        return f"; carry over {', '.join(self.carried)}" if self.carried else ""


def _different(a: ast.AST, b: ast.AST) -> bool:
    """Whether two definitions differ in code (comments and layout do not count)."""
    return ast.dump(a) != ast.dump(b)


def _method_unit(receiver: ast.ClassDef, donor: ast.ClassDef, start: str) -> list[str] | None:
    """The smallest set of donor methods, grown from ``start``, that leaves the class consistent.

    A method that reads ``self.x`` needs the method that sets ``self.x`` the same way: whenever the
    mixed class reads an attribute nobody sets (or calls a donor-only helper method), the donor
    methods setting or defining it join the unit, and so do the donor's versions of receiver methods
    still reading attributes only the replaced methods set. Methods of one lineage share their
    storage, so a single method usually suffices there; across lineages the unit grows to the class.
    A unit whose result keeps state nothing reads (an ``__init__`` taken alone for an attribute only
    the donor's ``write`` uses) changes nothing and is refused.
    """
    mine, theirs = _methods(receiver), _methods(donor)
    class_names = _class_level_names(receiver)
    unit = {start}
    while True:
        mixed = {**mine, **{name: theirs[name] for name in unit}}
        missing = _missing_attributes(mixed, class_names)
        if not missing:
            dead = _unread_attributes(mixed, class_names) - _unread_attributes(mine, class_names)
            return None if dead else sorted(unit, key=list(theirs).index)
        grow = set()
        for name, fn in theirs.items():
            assigned, loaded = _method_attributes(fn)
            if name in missing or assigned & missing or (name in mine and loaded & missing):
                grow.add(name)
        if grow <= unit:
            return None
        unit |= grow


@dataclass(frozen=True)
class _Plan:
    """One crossover candidate: what to take, as a builder of the child and its description."""

    build: Callable[[_Source, _Source, str], tuple[str, str] | None]
    key: str


def _schema_fix(child: str, donor: _Source) -> tuple[str, list[str]] | None:
    """If the child's code reads schema fields its dataclasses lack, take those dataclasses from the donor."""
    parsed = _Source(child)
    uses = _schema_uses(parsed.tree)
    swap = [name for name in SCHEMA_CLASSES if not uses[name] <= _schema_fields(parsed.tree, name)]
    if not swap:
        return child, []
    move = _Transplant(parsed, donor)
    for name in swap:
        old, new = _module_class(parsed.tree, name), _module_class(donor.tree, name)
        if old is None or new is None or not uses[name] <= _schema_fields(donor.tree, name):
            return None
        if not move.replace(old, new, old):
            return None
    if not move.carry_dependencies():
        return None
    return move.result(), swap


def _describe_taken(what: str, tag: str, schemas: list[str], note: str) -> str:
    with_schema = f", with its {' and '.join(schemas)} schema" if schemas else ""
    return f"take {what} from parent #{tag} (crossover{with_schema}){note}"


def _methods_plan(start: str) -> _Plan:
    def build(receiver: _Source, donor: _Source, tag: str) -> tuple[str, str] | None:
        mine, theirs = _module_class(receiver.tree, LOGIC_CLASS), _module_class(donor.tree, LOGIC_CLASS)
        unit = _method_unit(mine, theirs, start)
        if unit is None:
            return None
        move = _Transplant(receiver, donor)
        old_methods, new_methods = _methods(mine), _methods(theirs)
        for name in unit:
            old = old_methods.get(name)
            done = move.replace(old, new_methods[name], mine) if old else move.add_method(mine, theirs, new_methods[name])
            if not done:
                return None
        if not move.carry_dependencies():
            return None
        fixed = _schema_fix(move.result(), donor)
        if fixed is None:
            return None
        names = [f"{name}()" for name in unit]
        what = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        return fixed[0], _describe_taken(what, tag, fixed[1], move.carried_note())

    return _Plan(build, f"method:{start}")


def _statement_plan(name: str, label: str) -> _Plan:
    """Take one module-level class or function from the donor (the schema is fixed up if needed)."""

    def build(receiver: _Source, donor: _Source, tag: str) -> tuple[str, str] | None:
        old, new = _bindings(receiver.tree).get(name), _bindings(donor.tree).get(name)
        move = _Transplant(receiver, donor)
        if not move.replace(old, new, old) or not move.carry_dependencies():
            return None
        fixed = _schema_fix(move.result(), donor)
        if fixed is None:
            return None
        return fixed[0], _describe_taken(label, tag, fixed[1], move.carried_note())

    return _Plan(build, f"statement:{name}")


def _constant_plan(name: str) -> _Plan:
    def build(receiver: _Source, donor: _Source, tag: str) -> tuple[str, str] | None:
        old = _bindings(receiver.tree)[name].value
        new = _bindings(donor.tree)[name].value
        start, end = receiver.span(old)
        child = _apply(receiver.text, [_Edit(start, end, donor.segment(new))])
        return child, f"take {name} = {donor.segment(new)} from parent #{tag} (crossover; was {receiver.segment(old)})"

    return _Plan(build, f"constant:{name}")


def _numeric_constants(tree: ast.Module) -> dict[str, ast.stmt]:
    return {name: stmt for stmt in tree.body if (name := _constant_target(stmt)) is not None}


def _plans(receiver: _Source, donor: _Source) -> list[_Plan]:
    plans: list[_Plan] = []
    mine_cls, theirs_cls = _module_class(receiver.tree, LOGIC_CLASS), _module_class(donor.tree, LOGIC_CLASS)
    if mine_cls and theirs_cls and _different(mine_cls, theirs_cls):
        plans.append(_statement_plan(LOGIC_CLASS, LOGIC_CLASS))
        mine, theirs = _methods(mine_cls), _methods(theirs_cls)
        # Units start from a method the receiver has: a donor-only helper comes with its callers.
        for name, fn in theirs.items():
            if name in mine and _different(mine[name], fn):
                plans.append(_methods_plan(name))
    for name in SCHEMA_CLASSES:
        old, new = _module_class(receiver.tree, name), _module_class(donor.tree, name)
        if old and new and _different(old, new):
            plans.append(_statement_plan(name, f"the {name} schema"))
    mine_defs, theirs_defs = _bindings(receiver.tree), _bindings(donor.tree)
    for name, stmt in theirs_defs.items():
        old = mine_defs.get(name)
        if isinstance(stmt, ast.FunctionDef) and isinstance(old, ast.FunctionDef) and _different(old, stmt):
            plans.append(_statement_plan(name, f"helper {name}()"))
    mine_numbers, theirs_numbers = _numeric_constants(receiver.tree), _numeric_constants(donor.tree)
    for name in sorted(mine_numbers.keys() & theirs_numbers.keys()):
        if mine_numbers[name].value.value != theirs_numbers[name].value.value:
            plans.append(_constant_plan(name))
    return sorted(plans, key=lambda p: p.key)


def crossover(source: str, donor_source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Take one consistent unit of ``donor_source`` into ``source``.

    Units: a ``KnowledgeBase`` method grown to a consistent set (see ``_method_unit``: a method
    comes with the donor methods that set the attributes it reads, so ``read`` taken from a donor
    whose ``write`` stores data differently brings that ``write`` and usually ``__init__`` along);
    the whole ``KnowledgeBase``; a helper function; a schema dataclass; or the value of a shared
    numeric constant. Whatever the taken code needs and the receiver lacks comes with it: module
    constants, helper functions and imports (found as free names in the syntax tree), and the
    donor's KnowledgeItem/Query when the code reads fields the receiver's schema lacks. A result is
    kept only if its class reads no attribute it never sets, reads no missing schema field, and
    passes the contract; so most crossovers run, and the ones that do not are never proposed.
    Instruction constants are never taken.
    """
    receiver, donor = _Source(source), _Source(donor_source)
    tag = _short_id(donor_source)
    plans = _plans(receiver, donor)
    rng.shuffle(plans)
    for plan in plans:
        built = plan.build(receiver, donor, tag)
        if built is not None and _consistent(built[0]) and _valid(source, built[0], avoid):
            return Mutation("crossover", built[1], built[0])
    raise NoMutation("nothing in the donor can be taken consistently")


# --------------------------------------------------------------------------------------------------
# 3. edit_instruction
# --------------------------------------------------------------------------------------------------

GUIDANCE: dict[str, tuple[str, ...]] = {
    "INSTRUCTION_KNOWLEDGE_ITEM": (
        "Keep names, dates and numbers exactly as written.",
        "Record who said it and when.",
        "Prefer concrete facts (people, places, events, possessions) over small talk.",
        "When the text reports a change (a new job, home, car or hobby), record the new value.",
        "Resolve relative dates such as 'yesterday' or 'last week' against the date of the text.",
        "Leave a field empty rather than guessing.",
    ),
    "INSTRUCTION_QUERY": (
        "Keep the names and dates from the question.",
        "Include the key nouns of the question, not only its topic.",
        "Add likely synonyms for the thing asked about (for example 'job' for 'work').",
        "For a question about the present, ask for the most recent information.",
        "Do not answer the question; only say what to look up.",
    ),
    "INSTRUCTION_RESPONSE": (
        "Answer with a short phrase taken from the context where possible.",
        "When two facts disagree, trust the most recent one.",
        "For a 'when' question, give the date as written, with day, month and year.",
        "Do not repeat the question in the answer.",
        "If the context does not hold the answer, say you don't know.",
    ),
    "ALWAYS_ON_KNOWLEDGE": (
        "Facts may change over time: prefer the most recent fact when two disagree.",
        "Relative dates ('yesterday', 'last week') count from the date of the message they appear in.",
        "A person described rather than named (an owner, a cousin) can be identified in one excerpt and "
        "looked up in another.",
    ),
}

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z'\"(])")


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


def _string_literal(head: str, value: str) -> str:
    """``value`` as Python source after ``head`` ("NAME = "): one line if it fits, else a wrapped concatenation."""
    one_line = json.dumps(value, ensure_ascii=False)
    if len(head) + len(one_line) <= _LINE_WIDTH:
        return one_line
    pieces = [""]
    for word in re.findall(r"\S+\s*", value):
        if pieces[-1] and len(pieces[-1]) + len(word) > _LINE_WIDTH - 8:
            pieces.append("")
        pieces[-1] += word
    inner = "".join(f"    {json.dumps(p, ensure_ascii=False)}\n" for p in pieces)
    return f"(\n{inner})"


def _instruction_edits(value: str, name: str) -> list[tuple[str, str]]:
    """(new value, description) for every one-sentence addition or removal."""
    present = _sentences(value)
    options = []
    for sentence in GUIDANCE[name]:
        if sentence not in value:
            joined = f"{value.rstrip()} {sentence}" if value.strip() else sentence
            options.append((joined, f"reword {name}: add \"{sentence}\""))
    # Drop a sentence only while one remains; the always-on text may become empty.
    if len(present) > 1 or (name == "ALWAYS_ON_KNOWLEDGE" and present):
        for i, sentence in enumerate(present):
            rest = " ".join(present[:i] + present[i + 1 :])
            options.append((rest, f"reword {name}: drop \"{sentence}\""))
    return options


def edit_instruction(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Add one generic guidance sentence (from ``GUIDANCE``) to an instruction constant, or drop one.

    The constant's statement is rewritten in place, on one line if it fits, else as a parenthesised
    concatenation. Offline, edits of the three INSTRUCTION_* constants cannot change a score:
    ``OfflineBackend`` accepts them but its rules ignore them. ``ALWAYS_ON_KNOWLEDGE`` edits can: its
    text joins the retrieved context when the offline agent answers, so each sentence is one more
    candidate answer (usually a distractor; the retrieved context wins ties). With an LLM task agent
    all four matter.
    """
    parsed = _Source(source)
    statements = _bindings(parsed.tree)
    names = [n for n in REQUIRED_CONSTANTS if isinstance(getattr(statements.get(n), "value", None), ast.Constant)]
    rng.shuffle(names)
    for name in names:
        stmt = statements[name]
        options = _instruction_edits(stmt.value.value, name)
        rng.shuffle(options)
        for value, description in options:
            target = stmt.annotation if isinstance(stmt, ast.AnnAssign) else stmt.targets[-1]
            start, head_end = parsed.span(stmt)[0], parsed.span(target)[1]
            head = parsed.text[start:head_end] + " = "
            child = _apply(source, [_Edit(start, parsed.span(stmt)[1], head + _string_literal(head, value))])
            if _valid(source, child, avoid):
                return Mutation("edit_instruction", description, child)
    raise NoMutation("no instruction constant to edit")


# --------------------------------------------------------------------------------------------------
# 4. filter_writes and order_by_recency: what memory keeps, and in which order
# --------------------------------------------------------------------------------------------------

MIN_WRITE_WORDS_NAME = "MIN_WRITE_WORDS"
# Greetings and acknowledgements ("Sure, take care!", "So what's new with you?") are shorter than this.
MIN_WRITE_WORDS = 6
SEEN_ATTRIBUTE = "_stored_texts"
# Locals the guards introduce at the top of write(). Only a module-level name of the same spelling
# clashes (code after the guard would read the local instead); the program's own locals are assigned
# before they are read, after the guard.
_GUARD_LOCALS = frozenset({"said"})


def _stores_something(fn: ast.FunctionDef) -> bool:
    body = [s for s in fn.body if not is_docstring(s)]
    return any(not isinstance(s, ast.Pass) and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in body)


def _said(raw: str) -> str:
    """The guards' shared first line: what a turn says, without its leading "[date] " header."""
    return f'said = {raw}.split("] ", 1)[-1] if {raw}.startswith("[") else {raw}'


def _guard_edit(parsed: _Source, write: ast.FunctionDef, raw: str, lines: list[str]) -> _Edit:
    """Insert a guard at the top of write(), after the shared ``said`` line if an earlier guard put it
    there, else with that line, above any comment attached to write()'s first statement."""
    first = _first_statement(write)
    indent = _indent_of(parsed, first)
    text = "".join(f"{indent}{line}\n" for line in lines)
    if ast.dump(first) == ast.dump(ast.parse(_said(raw)).body[0]):
        at = parsed.line_end(first.end_lineno)
        return _Edit(at, at, text)
    at = parsed.line_starts[_comment_start(parsed, first) - 1]
    return _Edit(at, at, f"{indent}{_said(raw)}\n" + text)


def _constant_insertion(parsed: _Source, text: str) -> _Edit:
    """Insert a new constant after the last numeric module constant (with the other knobs), else before the first class."""
    constants = [stmt for stmt in parsed.tree.body if _constant_target(stmt)]
    if constants:
        at = parsed.line_end(constants[-1].end_lineno)
        return _Edit(at, at, text)
    first_class = next(s for s in parsed.tree.body if isinstance(s, ast.ClassDef))
    at = parsed.block_span(first_class)[0]
    return _Edit(at, at, text + "\n\n")


def _short_turn_filter(parsed: _Source, write: ast.FunctionDef, raw: str) -> tuple[list[_Edit], str] | None:
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


def _repeat_filter(parsed: _Source, cls: ast.ClassDef, write: ast.FunctionDef, raw: str) -> tuple[list[_Edit], str] | None:
    """Skip turns whose words (case and spacing aside) were stored before, in a set on the instance."""
    init = _methods(cls).get("__init__")
    first_init = _first_statement(init) if init else None
    if first_init is None or SEEN_ATTRIBUTE in _class_attributes(cls):
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
    if write is None or len(params) < 3 or _first_statement(write) is None or not _stores_something(write):
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


def _list_order_flips(parsed: _Source, write: ast.FunctionDef) -> list[tuple[_Edit, str]]:
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


def _sql_order_flips(parsed: _Source, read: ast.FunctionDef) -> list[tuple[_Edit, str]]:
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


def _sort_tie_flips(parsed: _Source, read: ast.FunctionDef) -> list[tuple[_Edit, str]]:
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


def _is_call_to(node: ast.AST, name: str) -> bool:
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


# --------------------------------------------------------------------------------------------------
# propose
# --------------------------------------------------------------------------------------------------

# Relative chances of each kind. Instruction edits are the least likely: offline they are neutral
# (ALWAYS_ON_KNOWLEDGE aside), so they would spend evaluations without moving the search.
KIND_WEIGHTS: dict[str, float] = {
    "perturb_numbers": 2.5,
    "crossover": 1.5,
    "filter_writes": 1.5,
    "order_by_recency": 1.5,
    "edit_instruction": 1.0,
}


def _parts(source: str) -> set[str]:
    """The program's definitions (module statements and KnowledgeBase methods), as code without layout."""
    tree = ast.parse(source)
    cls = _module_class(tree, LOGIC_CLASS)
    members = list(_methods(cls).values()) if cls else []
    return {ast.dump(node) for node in tree.body + members}


def _kinship(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def _crossover_any(source: str, population: Sequence[str], rng: random.Random, avoid: Collection[str]) -> Mutation:
    """Crossover with a donor drawn by kinship: relatives share their storage, so a method or a
    helper can move between them alone and the child mixes both; between unrelated programs only
    whole designs can move, which mostly re-creates the donor. Unrelated donors stay possible."""
    donors = sorted({p for p in population if p != source})
    mine = _parts(source)
    weights = [0.25 + 4 * _kinship(mine, _parts(d)) for d in donors]
    for donor in _weighted_shuffle(donors, weights, rng):
        try:
            return crossover(source, donor, rng, avoid=avoid)
        except NoMutation:
            continue
    raise NoMutation("no donor in the population offers a consistent unit")


def propose(
    parent_source: str,
    population_sources: list[str],
    rng: random.Random,
    *,
    frozen_code: bool = False,
    frozen_instructions: bool = False,
) -> Mutation:
    """One child of ``parent_source``: a random applicable kind, honouring the ablation switches.

    ``frozen_code`` allows only instruction edits (the paper's "-Code" ablation);
    ``frozen_instructions`` never edits instructions ("-Instruction"). A kind that does not apply
    (no numeric tunable, no usable donor, filters already in place...) gives way to the next one;
    ``NoMutation`` if none applies. A child equal to a program of ``population_sources`` is never
    returned.
    """
    code_kinds = ["perturb_numbers", "crossover", "filter_writes", "order_by_recency"]
    kinds = ([] if frozen_code else code_kinds) + ([] if frozen_instructions else ["edit_instruction"])
    single: dict[str, Callable[..., Mutation]] = {
        "perturb_numbers": perturb_numbers,
        "filter_writes": filter_writes,
        "order_by_recency": order_by_recency,
        "edit_instruction": edit_instruction,
    }
    # A child identical to a program already in the population would only repeat its evaluation.
    known = frozenset(population_sources)
    for kind in _weighted_shuffle(kinds, [KIND_WEIGHTS[k] for k in kinds], rng):
        try:
            if kind == "crossover":
                return _crossover_any(parent_source, population_sources, rng, known)
            return single[kind](parent_source, rng, avoid=known)
        except NoMutation:
            continue
    raise NoMutation(f"no mutation applies (allowed kinds: {', '.join(kinds) or 'none'})")
