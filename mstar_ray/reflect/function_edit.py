"""The ``function`` edit format: the reflector returns whole definitions and the harness splices them in.

Small models cannot write a diff, but they can write a function (OFFLINE.md: a 1.5B coder's replacement
functions compiled 10 times in 10, its V4A patches applied 0 times in 10). The reply's code is read as
Python and merged into the parent by name:

- a top-level ``def``/``class`` replaces the parent's definition of that name, or is added before
  ``class KnowledgeBase`` (so the classes that use it find it defined);
- a class whose body holds only methods is merged method by method into the parent's class of that name
  (a model that shows ``class KnowledgeBase`` with only ``read`` has not deleted ``write``); a class with
  fields or other statements (a dataclass) replaces the parent's whole class;
- a top-level function whose first parameter is ``self`` is a method: it replaces the same-named method
  (of ``KnowledgeBase`` first), as models often copy one method out of its class;
- an assignment to a name the parent assigns at top level (the instruction constants, tuning constants)
  replaces it; a new one whose value is a literal is added after the parent's constants; ``COMMIT_MESSAGE``
  is the commit message;
- an import the parent lacks is added after the parent's imports;
- anything else at top level (example calls, ``if __name__ == "__main__":`` blocks) is dropped and named
  in the result's ``tolerances``.

Untouched parts of the parent keep their exact text; only the spliced definitions are re-indented.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass, field

from mstar_ray.program_ast import assigned_name, is_docstring, named_pieces

KNOWLEDGE_BASE = "KnowledgeBase"


class EditError(ValueError):
    """The reply's code cannot be merged; the message goes back to the reflector for a repair."""


@dataclass
class MergeResult:
    source: str
    commit_message: str | None = None  # a COMMIT_MESSAGE assignment in the code, if any
    replaced: list[str] = field(default_factory=list)  # e.g. "KnowledgeBase.read", "INSTRUCTION_QUERY"
    added: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)  # replaced by the same code (layout aside)
    tolerances: list[str] = field(default_factory=list)


def _parse(code: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        line = (exc.text or "").rstrip()
        raise EditError(f"the code in the reply is not valid Python: {exc.msg} at its line {exc.lineno}: "
                        f"{line!r}. Reply with complete definitions in one ```python block.") from None


def merge_definitions(parent: str, code: str, *, original: str | None = None,
                      changed: set[str] | None = None) -> MergeResult:
    """Splice the definitions in ``code`` into ``parent`` (see the module docstring for the rules).

    ``original`` is the program the reply was written for (``parent`` when the reply has one block) and
    ``changed`` the pieces earlier blocks of the reply changed: a piece restated exactly as in ``original``
    after the reply changed it (a model that shows its new ``read`` and then the whole class "for
    context") does not undo the change."""
    code = dedent_block(code)  # a block copied with its class indentation
    reply = _parse(code)
    snippet_lines = code.splitlines()
    program = _Program(parent)
    result = MergeResult(source=parent)
    first = named_pieces(original if original is not None else parent)
    changed = set() if changed is None else changed
    definitions = [node for node in reply.body if not is_docstring(node)]
    if not definitions:
        raise EditError("the code in the reply defines nothing: give whole def/class blocks or constants")

    def keep(name: str, before: list[str]) -> str:
        """Undo a restatement of a changed piece; note what the piece is now."""
        now = named_pieces(program.text()).get(name)
        if name in changed and name in first and now == first[name]:
            program.lines = before
            result.tolerances.append(f"ignored: a later copy of {name} as it was, after the reply changed it")
        elif name in first and now != first[name]:
            changed.add(name)
        return name

    for node in definitions:
        text = _node_text(snippet_lines, node)
        before = list(program.lines)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if program.add_import(node, text):
                result.added.append(ast.unparse(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if _is_method(node) and not program.has_function(node.name):
                result.replaced.append(keep(program.put_method(node.name, text), before))
            else:
                (result.replaced if program.put_top(node.name, text) else result.added).append(keep(node.name, before))
        elif isinstance(node, ast.ClassDef):
            if _only_methods(node) and program.has_class(node.name):
                for method in node.body:
                    if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        before = list(program.lines)
                        owner = program.put_method(method.name, _node_text(snippet_lines, method), node.name)
                        result.replaced.append(keep(owner, before))
            else:
                (result.replaced if program.put_top(node.name, text) else result.added).append(keep(node.name, before))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and (name := assigned_name(node)) is not None:
            if name == "COMMIT_MESSAGE":
                if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    result.commit_message = node.value.value
                continue
            if program.has_assignment(name) or _is_literal(node):
                (result.replaced if program.put_assignment(name, text) else result.added).append(keep(name, before))
            else:
                result.tolerances.append(f"dropped: line {node.lineno} assigns a new name {name!r} from code")
        else:
            result.tolerances.append(f"dropped: line {node.lineno} ({type(node).__name__}) is not a definition")
    result.source = program.text()
    after = named_pieces(result.source)
    result.unchanged = [name for name in result.replaced if name in first and first[name] == after.get(name)]
    return result


def dedent_block(code: str) -> str:
    """Move a block copied with its class indentation to column 0, by the first code line's indentation
    (``textwrap.dedent`` would stop at a less-indented line inside a multi-line string)."""
    lines = code.replace("\t", "    ").splitlines()
    first = next((line for line in lines if line.strip()), "")
    indent = first[: len(first) - len(first.lstrip())]
    return "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines) + "\n"


def _is_method(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = node.args.posonlyargs + node.args.args
    return bool(args) and args[0].arg in ("self", "cls")


def _only_methods(node: ast.ClassDef) -> bool:
    body = [stmt for stmt in node.body if not is_docstring(stmt) and not isinstance(stmt, ast.Pass)]
    return bool(body) and all(isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) for stmt in body)


def _is_literal(node: ast.Assign | ast.AnnAssign) -> bool:
    """A new constant, as opposed to example code such as ``kb = KnowledgeBase(toolkit)``."""
    if node.value is None:  # ``x: int`` binds no value (literal_eval(None) raises ValueError: the same answer)
        return False
    try:
        ast.literal_eval(node.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _first_line(node: ast.stmt) -> int:
    """1-based first line, decorators included."""
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _node_text(lines: list[str], node: ast.stmt) -> str:
    """The node's lines, moved to column 0 (a method taken out of its class)."""
    return _shift("\n".join(lines[_first_line(node) - 1 : node.end_lineno]), -node.col_offset)


def _shift(text: str, columns: int) -> str:
    """Indent (or dedent) every line by ``columns``, except lines inside a multi-line string, whose text
    is the string's value."""
    inside = _string_interiors(text)
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if number in inside or not line.strip():
            out.append(line)
        elif columns >= 0:
            out.append(" " * columns + line)
        else:
            cut = min(-columns, len(line) - len(line.lstrip(" ")))
            out.append(line[cut:])
    return "\n".join(out)


def _string_interiors(text: str) -> set[int]:
    """1-based numbers of the lines that continue a multi-line string token."""
    inside: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(dedent_block(text)).readline):
            if token.type == tokenize.STRING and token.end[0] > token.start[0]:
                inside.update(range(token.start[0] + 1, token.end[0] + 1))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # not tokenizable as a whole: shift every line
    return inside


class _Program:
    """The parent as lines, edited in place by top-level name; re-parsed after every edit so that line
    numbers stay right (programs are small)."""

    def __init__(self, source: str):
        self.lines = source.splitlines()

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def _module(self) -> ast.Module:
        return ast.parse(self.text())

    def _top(self, name: str) -> ast.stmt | None:
        for node in self._module().body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                return node
            if assigned_name(node) == name:
                return node
        return None

    def has_function(self, name: str) -> bool:
        return isinstance(self._top(name), (ast.FunctionDef, ast.AsyncFunctionDef))

    def has_assignment(self, name: str) -> bool:
        found = self._top(name)
        return found is not None and assigned_name(found) == name

    def has_class(self, name: str) -> bool:
        return isinstance(self._top(name), ast.ClassDef)

    def _replace(self, node: ast.stmt, text: str, indent: int = 0) -> None:
        self.lines[_first_line(node) - 1 : node.end_lineno] = _shift(text, indent).splitlines()

    def _insert(self, at: int, text: str) -> None:
        """Insert ``text`` before 0-based line ``at``, set apart by blank lines."""
        self.lines[at:at] = ["", *text.splitlines(), ""]

    def put_top(self, name: str, text: str) -> bool:
        """Replace the top-level definition ``name``; add it before KnowledgeBase (or at the end) if new.
        True when it replaced one."""
        found = self._top(name)
        if found is not None:
            self._replace(found, text)
            return True
        anchor = self._top(KNOWLEDGE_BASE)
        self._insert(_first_line(anchor) - 1 if anchor is not None else len(self.lines), text)
        return False

    def put_assignment(self, name: str, text: str) -> bool:
        found = self._top(name)
        if found is not None:
            self._replace(found, text)
            return True
        assignments = [n for n in self._module().body if assigned_name(n) is not None]
        at = assignments[-1].end_lineno if assignments else self._after_imports()
        self.lines[at:at] = text.splitlines()
        return False

    def put_method(self, name: str, text: str, owner: str | None = None) -> str:
        """Replace (or add) method ``name`` in class ``owner``, or in the class that has it (KnowledgeBase
        first) when no owner is given. Returns "Class.method"."""
        classes = [n for n in self._module().body if isinstance(n, ast.ClassDef)]
        if owner is None:
            holders = [c for c in classes if any(_is_def(m, name) for m in c.body)]
            holders.sort(key=lambda c: c.name != KNOWLEDGE_BASE)
            target = holders[0] if holders else next((c for c in classes if c.name == KNOWLEDGE_BASE), None)
        else:
            target = next((c for c in classes if c.name == owner), None)
        if target is None:
            raise EditError(f"method {name!r} has no class to go into: the program has no class "
                            f"{owner or KNOWLEDGE_BASE!r}")
        indent = target.body[0].col_offset
        method = next((m for m in target.body if _is_def(m, name)), None)
        if method is not None:
            self._replace(method, text, indent)
        else:
            at = target.end_lineno
            self.lines[at:at] = ["", *_shift(text, indent).splitlines()]
        return f"{target.name}.{name}"

    def _after_imports(self) -> int:
        imports = [n for n in self._module().body if isinstance(n, (ast.Import, ast.ImportFrom))]
        return (imports[-1].end_lineno or 0) if imports else 0  # parsed nodes always have end_lineno

    def add_import(self, node: ast.Import | ast.ImportFrom, text: str) -> bool:
        present = {ast.unparse(n) for n in self._module().body if isinstance(n, (ast.Import, ast.ImportFrom))}
        if ast.unparse(node) in present:
            return False
        at = self._after_imports()
        self.lines[at:at] = text.splitlines()
        return True


def _is_def(node: ast.stmt, name: str) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
