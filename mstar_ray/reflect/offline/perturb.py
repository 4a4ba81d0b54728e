"""``perturb_numbers``: scale one numeric tunable (an UPPER_CASE module constant, or an int literal used as
a slice bound, keyword argument, comparison threshold or default inside the code).
"""

from __future__ import annotations

import ast
import random
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal
from typing import cast

from mstar_ray.contract import LOGIC_CLASS
from mstar_ray.reflect.offline.engine import (
    _READ_BOUND_NAME, READ_LIMIT, SCALE_FACTORS, _Edit, Mutation, NoMutation, _Source, _apply,
    _code_functions, _constant_target, _methods, _module_class, _number, _valid, _weighted_shuffle,
)
from mstar_ray.reflect.offline.engine import _Function
from mstar_ray.reflect.offline.engine import _constant_number


@dataclass(frozen=True)
class _Tunable:
    node: ast.Constant
    label: str
    at_least: int  # smallest allowed value (ints)
    at_most: float | None

    @property
    def value(self) -> int | float:
        """The literal's number: a tunable is only ever an int or float literal (``_number``)."""
        return cast(int | float, self.node.value)


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


def _module_tunables(tree: ast.Module, caps: _ReadCaps) -> list[_Tunable]:
    found = []
    for stmt in tree.body:
        name, node = _constant_target(stmt), _constant_number(stmt)
        if name is not None and node is not None:
            bounds_read = _READ_BOUND_NAME.search(name) or name in caps.names
            found.append(_Tunable(node, name, 1, READ_LIMIT if bounds_read else None))
    return found


def _literal_roles(fn: _Function) -> Iterable[tuple[ast.AST | None, str]]:
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
    default: ast.expr | None  # a keyword-only parameter without a default has None
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
    value = tunable.value
    found: list[int | float]
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
    return weight / 4 if tunable.at_most is not None and tunable.value >= tunable.at_most else weight


def _within(tunable: _Tunable, places: Collection[str]) -> bool:
    """Whether a tunable is one of the named constants, or a literal in one of the named functions ("read()")."""
    return tunable.label in places or any(tunable.label.endswith(f" in {fn} (line {tunable.node.lineno})") for fn in places)


def perturb_numbers(source: str, rng: random.Random, *, avoid: Collection[str] = (),
                    within: Collection[str] | None = None, direction: Literal["raise", "lower"] | None = None) -> Mutation:
    """Scale one numeric tunable by a factor from ``SCALE_FACTORS`` (or move a small int by one).

    Tunables are UPPER_CASE int/float module constants and the int literals (>= 2) that serve as
    slice bounds, keyword arguments (``n_results=5``), comparison thresholds, ``min``/``max``/
    ``nlargest`` arguments or parameter defaults in the code. Booleans, 0/1 and anything inside a
    string are never touched. Ints stay ints >= 1; a bound on what ``read()`` returns (by its name, or
    because it slices read()'s return value) stays <= 3000, the contract's limit; a float <= 1 (a
    fraction or a similarity threshold) stays <= 1.

    ``within`` (constant names and function labels such as ``"write()"``) limits the tunables to those a
    stage of the memory uses; ``direction`` to values above or below the current one.
    """
    parsed = _Source(source)
    caps = _read_caps(parsed.tree)
    named, literals = _module_tunables(parsed.tree, caps), _code_tunables(parsed.tree, caps)
    if within is not None:
        named, literals = [t for t in named if _within(t, within)], [t for t in literals if _within(t, within)]
    weights = [_draw_weight(t, True) for t in named] + [_draw_weight(t, False) for t in literals]
    for tunable in _weighted_shuffle(named + literals, weights, rng):
        for new in _new_values(tunable, rng):
            if direction is not None and (new > tunable.value) != (direction == "raise"):
                continue
            start, end = parsed.span(tunable.node)
            child = _apply(source, [_Edit(start, end, repr(new))])
            if _valid(source, child, avoid):
                verb = "raise" if new > tunable.value else "lower"
                return Mutation("perturb_numbers", f"{verb} {tunable.label} from {tunable.value} to {new}", child)
    raise NoMutation("no numeric tunable to perturb")
