"""Questions about a memory program's syntax tree that the contract checks, the mutations, the function
merge and the structural trees all ask the same way."""

from __future__ import annotations

import ast


def is_docstring(statement: ast.AST) -> bool:
    """A bare string expression: a docstring when it is the first statement of its body."""
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and \
        isinstance(statement.value.value, str)


def assigned_name(statement: ast.AST) -> str | None:
    """The one plain name an assignment binds (``X = ...`` or ``X: T = ...``), else None."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id
    return None
