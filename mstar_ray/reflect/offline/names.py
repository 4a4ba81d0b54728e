"""Names: what a piece of code reads without binding it (free names), and what a statement binds.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Sequence


_BUILTIN_NAMES = frozenset(dir(builtins))
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


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
                if not isinstance(node, ast.Lambda) and node.returns is not None:
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
