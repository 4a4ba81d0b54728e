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


def named_pieces(source: str) -> dict[str, str]:
    """Each top-level definition, assignment and class method by name ("read" at top level, methods as
    "Class.method"), mapped to its AST dump: what a change to the program can be said to touch. Classes
    whose body holds more than methods (dataclasses) count as one piece; imports are one piece together."""
    pieces: dict[str, str] = {}
    imports = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(ast.dump(node))
        elif isinstance(node, ast.ClassDef):
            methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            rest = [s for s in node.body if s not in methods and not is_docstring(s)]
            if methods and not rest:
                pieces.update({f"{node.name}.{m.name}": ast.dump(m) for m in methods})
            else:
                pieces[node.name] = ast.dump(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            pieces[node.name] = ast.dump(node)
        elif (name := assigned_name(node)) is not None and name != "COMMIT_MESSAGE":
            pieces[name] = ast.dump(node)
    if imports:
        pieces["imports"] = "\n".join(sorted(imports))
    return pieces


def changed_pieces(parent: str, child: str) -> list[str]:
    """Names of the pieces (``named_pieces``) the child adds, removes or changes, in the child's order."""
    before, after = named_pieces(parent), named_pieces(child)
    changed = [name for name, dump in after.items() if before.get(name) != dump]
    return changed + [name for name in before if name not in after]


def unused_additions(parent: str, child: str) -> list[str]:
    """When everything the child changes is a piece the parent lacks (``named_pieces``) and no code of
    the child uses any of them, their names; else []. Such a child behaves as its parent: the agent calls
    only ``__init__``, ``write`` and ``read``."""
    before, after = named_pieces(parent), named_pieces(child)
    changed = changed_pieces(parent, child)
    if not changed or any(name in before for name in changed):
        return []
    added = {name.rsplit(".", 1)[-1]: name for name in changed}
    used: set[str] = set()
    for node in ast.parse(child).body:
        for holder in (node.body if isinstance(node, ast.ClassDef) else [node]):
            if getattr(holder, "name", None) in added or assigned_name(holder) in added:
                continue  # a piece's own definition is no use of it
            for inner in ast.walk(holder):
                if isinstance(inner, ast.Name):
                    used.add(inner.id)
                elif isinstance(inner, ast.Attribute):
                    used.add(inner.attr)
    return [] if used & set(added) else sorted(added.values())
