"""A memory program's source as an ordered labelled tree, the input of tree edit distance.

The tree is the program's syntax tree with what carries no structure removed: expression contexts
(Load/Store/Del), docstrings (first string statement of a module, class or function) and the
``COMMIT_MESSAGE`` constant (metadata about the edit, not the program). Everything a node says about
itself goes into its one label instead of extra leaves, so trees stay close to the AST's node count:
the node type, the field it fills in its parent (so moving a statement from an ``if``'s body to its
``else`` is an edit), operators (``BinOp(Add)``), and, by abstraction level, identifiers and literals:

- ``exact``: identifiers and literal values kept; the instruction constants are prompt text, so two
  programs whose instructions differ are different here;
- ``names``: identifiers kept, literals reduced to their kind (``str``, ``num``, ``bool``...);
- ``shape``: neither; only node types, fields, operators and structure.

Labels are stored as 64-bit hashes so that trees from different programs compare without a shared
vocabulary and pickle small (they travel to Ray tasks); a collision (odds ~2^-64 per pair of labels)
would only make one rename free.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mstar_ray.contract import bounded_parse
from mstar_ray.program_ast import is_docstring

Level = Literal["exact", "names", "shape"]
LEVELS: tuple[Level, ...] = ("exact", "names", "shape")

METADATA_CONSTANTS = frozenset({"COMMIT_MESSAGE"})
_DOCSTRING_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_NOISE = (ast.expr_context,)
# Operators are field-less AST nodes; as leaves they would double the size of arithmetic for nothing.
_OPERATORS = (ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
# Formatting or typing-comment detail that the parser records but the program does not depend on.
_IGNORED_FIELDS = frozenset({"type_comment", "kind", "simple"})


@dataclass(frozen=True, eq=False)
class Tree:
    """An ordered tree in postorder (children left to right before their parent).

    ``sizes[i]`` is the size of the subtree rooted at node ``i``, so its leftmost leaf is
    ``i - sizes[i] + 1`` and the root is the last node. ``mirror_*`` is the same tree with every
    node's children reversed: the distance is the same, but the cheaper of the two orientations to
    decompose differs from pair to pair.
    """

    labels: np.ndarray  # int64 label hashes
    sizes: np.ndarray  # int32
    mirror_labels: np.ndarray
    mirror_sizes: np.ndarray

    @property
    def size(self) -> int:
        return len(self.labels)


def _parse(source: str) -> ast.AST:
    """Within the checker's caps on the syntax tree (nodes, depth; ``contract.bounded_parse``): what the distance
    and the key cost is bounded by them, whatever reached the index."""
    try:
        return bounded_parse(source)
    except SyntaxError as exc:
        raise ValueError(f"line {exc.lineno}: {exc.msg}") from exc


def program_tree(source: str, level: Level = "exact") -> Tree:
    """The tree of ``source`` at ``level``; a ValueError naming the line if it does not parse."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; expected one of {LEVELS}")
    root = _labelled(source, level)
    labels, sizes = _postorder(root, reverse=False)
    mirror_labels, mirror_sizes = _postorder(root, reverse=True)
    return Tree(_hashes(labels), np.array(sizes, dtype=np.int32), _hashes(mirror_labels),
                np.array(mirror_sizes, dtype=np.int32))


def structural_key(source: str) -> str:
    """A hash of the ``exact`` tree: equal for programs that differ only in formatting, comments,
    docstrings or commit message, so "structurally identical at the finest level" is key equality."""
    labels, sizes = _postorder(_labelled(source, "exact"), reverse=False)
    digest = hashlib.sha256()
    for label, size in zip(labels, sizes):
        # the size makes the serialisation unambiguous: postorder plus subtree sizes fixes the shape
        digest.update(f"{size}\x00{label}\x01".encode())
    return digest.hexdigest()[:16]


@dataclass
class _Node:
    label: str
    children: list[_Node]


def _labelled(source: str, level: Level) -> _Node:
    root = _Node("Module", [])
    _fill(root, _parse(source), level)
    return root


def _fill(parent: _Node, node: ast.AST, level: Level) -> None:
    """Append the kept children of ``node`` to ``parent`` (whose label is already set)."""
    for field, value in ast.iter_fields(node):
        if field in _IGNORED_FIELDS:
            continue
        items = value if isinstance(value, list) else [value]
        if isinstance(node, _DOCSTRING_OWNERS) and field == "body" and items and is_docstring(items[0]):
            items = items[1:]
        if isinstance(node, ast.Module) and field == "body":
            items = [item for item in items if not _is_metadata(item)]
        for item in items:
            if isinstance(item, ast.AST) and not isinstance(item, _NOISE + _OPERATORS):
                child = _Node(f"{field}:{_label(item, level)}", [])
                _fill(child, item, level)
                parent.children.append(child)


def _label(node: ast.AST, level: Level) -> str:
    """Type, operators, and (by level) identifiers and literal values: all a node holds that is not
    another node."""
    parts = [type(node).__name__]
    for field, value in ast.iter_fields(node):
        if field in _IGNORED_FIELDS:
            continue
        if isinstance(value, _OPERATORS):
            parts.append(type(value).__name__)
        elif isinstance(value, list) and value and all(isinstance(v, _OPERATORS) for v in value):
            parts.append(",".join(type(v).__name__ for v in value))
        elif level == "shape" or _holds_nodes(value):
            continue
        elif isinstance(node, (ast.Constant, ast.MatchSingleton)) and field == "value":
            parts.append(repr(value) if level == "exact" else _literal_kind(value))
        elif value is not None and value != []:
            # identifiers (names, attributes, arguments, imports) and small flags such as an
            # f-string conversion or a relative import's level
            parts.append(f"{field}={value!r}")
    return " ".join(parts)


def _holds_nodes(value: object) -> bool:
    return isinstance(value, ast.AST) or isinstance(value, list) and any(isinstance(v, ast.AST) for v in value)


def _literal_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float, complex)):
        return "num"
    if isinstance(value, (str, bytes)):
        return "str"
    return repr(value)  # None and Ellipsis are their own kind


def _is_metadata(statement: ast.AST) -> bool:
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AnnAssign):
        targets = [statement.target]
    else:
        return False
    return all(isinstance(t, ast.Name) and t.id in METADATA_CONSTANTS for t in targets)


def _postorder(root: _Node, reverse: bool) -> tuple[list[str], list[int]]:
    labels: list[str] = []
    sizes: list[int] = []

    def visit(node: _Node) -> None:
        start = len(labels)
        for child in reversed(node.children) if reverse else node.children:
            visit(child)
        labels.append(node.label)
        sizes.append(len(labels) - start)

    visit(root)
    return labels, sizes


def _hashes(labels: list[str]) -> np.ndarray:
    return np.array([int.from_bytes(hashlib.blake2b(label.encode(), digest_size=8).digest(), "little", signed=True)
                     for label in labels], dtype=np.int64)
