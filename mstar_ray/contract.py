"""The memory-program contract (docs/design.md section 2), checked statically from the source text.

Candidate programs are written by an LLM and treated as hostile, so nothing here imports or executes
them: every fact (classes, fields, constants, signatures, imports) is read from the syntax tree. The
checker reports every violation it finds in one pass, each with its line, so a reflector can fix them
all in one repair round.
"""

from __future__ import annotations

import ast
import threading
import warnings
from typing import Literal, overload
from dataclasses import dataclass

from mstar_ray.program_schema import FieldSpec, ProgramSchema
from mstar_ray.sandbox.python_subset import ALLOWED_IMPORTS, FORBIDDEN_BUILTINS as FORBIDDEN_NAMES

SCHEMA_CLASSES = ("KnowledgeItem", "Query")
LOGIC_CLASS = "KnowledgeBase"
REQUIRED_CONSTANTS = (
    "INSTRUCTION_KNOWLEDGE_ITEM",
    "INSTRUCTION_QUERY",
    "INSTRUCTION_RESPONSE",
    "ALWAYS_ON_KNOWLEDGE",
)
OPTIONAL_CONSTANTS = ("COMMIT_MESSAGE",)

# Dunder attributes that are harmless; every other one is a classic route out of a restricted namespace
# (``().__class__.__base__.__subclasses__()``, ``f.__globals__``, ``__builtins__``...).
ALLOWED_DUNDER_ATTRIBUTES = frozenset({"__init__", "__name__", "__doc__", "__post_init__"})

# (method, positional parameters after self)
REQUIRED_METHODS = (("__init__", ("toolkit",)), ("write", ("item", "raw_text")), ("read", ("query",)))
# Optional: ``feedback(query, score)`` is called after a training question's answer is scored (never on the
# questions that give the fitness or the test score), with the same limits as a read.
OPTIONAL_METHODS = (("feedback", ("query", "score")),)

_JSON_SCALARS = {"str": "str", "int": "int", "float": "float", "bool": "bool"}

# Bounds on what a program declares. A candidate is hostile and the host does work on all of it: it parses and
# walks the tree here, compares trees in the driver (a tree distance grows faster than its size), and builds
# the task agent's prompts from the constants and field descriptions. The largest seed has 12,000 characters,
# 1,912 nodes, nesting 24 deep, a 239-character constant and a 57-character description.
MAX_SOURCE_CHARS = 100_000
MAX_TREE_NODES = 8_000
MAX_TREE_DEPTH = 50
MAX_FIELDS = 64  # per schema class
MAX_DESCRIPTION_CHARS = 2_000
MAX_CONSTANT_CHARS = {"COMMIT_MESSAGE": 2_000}  # the others are bounded by the prompts they go into
# The part of one task-agent prompt that comes from the program's declarations, capped like the program's own
# toolkit prompts (``SandboxLimits.llm_prompt_max_chars``): what goes into the extraction prompt, the query
# prompt and the answer prompt.
DECLARED_PROMPT_MAX_CHARS = 32_000
DECLARED_PROMPTS = (("extraction", "INSTRUCTION_KNOWLEDGE_ITEM", "KnowledgeItem"), ("query", "INSTRUCTION_QUERY", "Query"),
                    ("answer", "INSTRUCTION_RESPONSE", None), ("answer", "ALWAYS_ON_KNOWLEDGE", None))


@dataclass(frozen=True)
class Violation:
    line: int
    code: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: [{self.code}] {self.message}"


@dataclass(frozen=True)
class ProgramInfo:
    """What the harness needs to know about a program that passed the checks."""

    schema: ProgramSchema
    constants: dict[str, str]
    has_feedback: bool = False


class ContractError(ValueError):
    def __init__(self, violations: list[Violation], filename: str = "program.py"):
        self.violations = violations
        lines = "\n".join(f"  {filename}:{v}" for v in violations)
        super().__init__(f"{filename} breaks the memory-program contract ({len(violations)} violation{'s' if len(violations) != 1 else ''}):\n{lines}")


def check_source(source: str) -> list[Violation]:
    """Every contract violation in ``source``, sorted by line."""
    return _Checker(source).run()[0]


def inspect_program(source: str, filename: str = "program.py") -> ProgramInfo:
    """Schema and instruction constants of a valid program; ``ContractError`` listing all violations otherwise."""
    violations, info = _Checker(source).run()
    if violations or info is None:
        raise ContractError(violations, filename)
    return info


class _Checker:
    def __init__(self, source: str):
        self.source = source
        self.violations: list[Violation] = []

    def add(self, node: ast.AST | int, code: str, message: str) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 1)
        self.violations.append(Violation(line, code, message))

    def run(self) -> tuple[list[Violation], ProgramInfo | None]:
        """Reports, never raises, whatever the source: a program too large or too deep for the checks to be
        bounded is itself the violation."""
        if len(self.source) > MAX_SOURCE_CHARS:
            return [Violation(1, "size", f"the program has {len(self.source):,} characters; at most "
                                         f"{MAX_SOURCE_CHARS:,} allowed")], None
        try:
            tree = bounded_parse(self.source)
        except SyntaxError as exc:
            return [Violation(exc.lineno or 1, "syntax", f"syntax error: {str(exc.msg)[:300]}")], None
        except TreeTooLarge as exc:
            return [Violation(1, "size", str(exc))], None
        try:
            return self._check(tree)
        except RecursionError:  # a last line: the bounds above keep every walk far from the limit
            return [Violation(1, "size", "the program nests too deeply for the contract checker")], None

    def _check(self, tree: ast.Module) -> tuple[list[Violation], ProgramInfo | None]:
        self._check_safety(tree)
        classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
        schema: dict[str, list[FieldSpec]] = {}
        for name in SCHEMA_CLASSES:
            if name not in classes:
                self.add(1, "missing-class", f"missing module-level class {name} (a @dataclass)")
            else:
                schema[name] = self._check_schema_class(classes[name])
        has_feedback = False
        if LOGIC_CLASS not in classes:
            self.add(1, "missing-class", f"missing module-level class {LOGIC_CLASS}")
        else:
            has_feedback = self._check_logic_class(classes[LOGIC_CLASS], classes)
        constants = self._check_constants(tree)
        self._check_declared_sizes(constants, schema)

        self.violations.sort(key=lambda v: (v.line, v.code))
        if self.violations:
            return self.violations, None
        info = ProgramInfo(
            schema=ProgramSchema(knowledge_item=schema["KnowledgeItem"], query=schema["Query"]),
            constants=constants,
            has_feedback=has_feedback,
        )
        return [], info

    # --- imports and escape routes -------------------------------------------------------------

    def _check_safety(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self._check_module(node, alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    self.add(node, "import", "relative imports are not allowed")
                else:
                    self._check_module(node, node.module or "")
            elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
                self.add(node, "forbidden-name", f"use of {node.id!r} is not allowed")
            elif isinstance(node, ast.Name) and node.id == "__builtins__":
                self.add(node, "forbidden-name", "use of '__builtins__' is not allowed")
            elif isinstance(node, ast.Attribute) and _is_dunder(node.attr):
                if node.attr not in ALLOWED_DUNDER_ATTRIBUTES:
                    self.add(node, "forbidden-attribute", f"access to attribute {node.attr!r} is not allowed")
            elif isinstance(node, ast.Call) and _is_name(node.func, {"getattr", "setattr", "delattr", "hasattr"}):
                if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                    attr = node.args[1].value
                    if isinstance(attr, str) and _is_dunder(attr) and attr not in ALLOWED_DUNDER_ATTRIBUTES:
                        self.add(node, "forbidden-attribute", f"access to attribute {attr!r} is not allowed")
                elif len(node.args) >= 2:
                    func = node.func.id  # type: ignore[attr-defined]
                    self.add(node, "forbidden-attribute", f"{func}() needs a literal attribute name")

    def _check_module(self, node: ast.AST, module: str) -> None:
        top = module.split(".", 1)[0]
        if top not in ALLOWED_IMPORTS:
            allowed = ", ".join(sorted(ALLOWED_IMPORTS - {"__future__"}))
            self.add(node, "import", f"import of {module!r} is not allowed (allowed: {allowed})")

    # --- schema --------------------------------------------------------------------------------

    def _check_schema_class(self, cls: ast.ClassDef) -> list[FieldSpec]:
        if not any(_is_dataclass_decorator(d) for d in cls.decorator_list):
            self.add(cls, "not-dataclass", f"class {cls.name} must be decorated with @dataclass")
        fields: list[FieldSpec] = []
        for stmt in cls.body:
            if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
                continue
            if _is_classvar(stmt.annotation):
                continue
            name = stmt.target.id
            parsed = _json_type(stmt.annotation)
            if parsed is None:
                annotation = _shorten(ast.unparse(stmt.annotation))
                self.add(
                    stmt,
                    "field-type",
                    f"field {cls.name}.{name}: {annotation} is not JSON-compatible "
                    "(use str, int, float, bool, list[...], dict[str, ...] or Optional[...] of those)",
                )
                continue
            type_, optional = parsed
            description, has_default = self._field_default(cls, name, stmt.value)
            fields.append(
                FieldSpec(name=name, type=type_, description=description, optional=optional, has_default=has_default)
            )
        if not fields:
            self.add(cls, "field-type", f"class {cls.name} declares no fields")
        if len(fields) > MAX_FIELDS:
            self.add(cls, "size", f"class {cls.name} declares {len(fields)} fields; at most {MAX_FIELDS} allowed")
        for spec in fields:
            if len(spec.description) > MAX_DESCRIPTION_CHARS:
                self.add(cls, "size", f"the description of {cls.name}.{spec.name} has {len(spec.description):,} "
                                      f"characters; at most {MAX_DESCRIPTION_CHARS:,} allowed")
        return fields

    def _field_default(self, cls: ast.ClassDef, name: str, value: ast.expr | None) -> tuple[str, bool]:
        if value is None:
            return "", False
        if isinstance(value, (ast.List, ast.Dict, ast.Set)):
            self.add(value, "field-default", f"field {cls.name}.{name} has a mutable default; use field(default_factory=...)")
            return "", True
        if isinstance(value, ast.Call) and _is_name(value.func, {"field"}) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "field"
        ):
            keywords = {k.arg: k.value for k in value.keywords if k.arg}
            has_default = "default" in keywords or "default_factory" in keywords
            return _metadata_description(keywords.get("metadata")), has_default
        return "", True

    # --- logic ---------------------------------------------------------------------------------

    def _check_logic_class(self, cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> bool:
        """Checks the required methods and any optional one defined; returns whether ``feedback`` is."""
        methods = _methods_with_local_bases(cls, classes)
        for method, params in REQUIRED_METHODS:
            fn = methods.get(method)
            if fn is None:
                self.add(cls, "signature", f"{LOGIC_CLASS}.{method}(self, {', '.join(params)}) is missing")
                continue
            self._check_signature(fn, method, params)
        for method, params in OPTIONAL_METHODS:
            if method in methods:
                self._check_signature(methods[method], method, params)
        return "feedback" in methods

    def _check_signature(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, method: str, params: tuple[str, ...]) -> None:
        if isinstance(fn, ast.AsyncFunctionDef):
            self.add(fn, "signature", f"{LOGIC_CLASS}.{method} must not be async")
        args = fn.args
        positional = [a.arg for a in args.posonlyargs + args.args]
        required = len(positional) - len(args.defaults)
        expected = 1 + len(params)
        required_kwonly = [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
        if len(positional) < expected and args.vararg is None or required > expected or required_kwonly:
            got = _shorten(ast.unparse(args))
            self.add(
                fn,
                "signature",
                f"{LOGIC_CLASS}.{method}({got}) must accept exactly (self, {', '.join(params)})",
            )

    # --- instruction ---------------------------------------------------------------------------

    def _check_constants(self, tree: ast.Module) -> dict[str, str]:
        found: dict[str, str] = {}
        for stmt in tree.body:
            targets: list[ast.expr] = []
            if isinstance(stmt, ast.Assign):
                targets, value = stmt.targets, stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets, value = [stmt.target], stmt.value
            for target in targets:
                if isinstance(target, ast.Name) and target.id in REQUIRED_CONSTANTS + OPTIONAL_CONSTANTS:
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        found[target.id] = value.value
                    else:
                        self.add(stmt, "constant", f"{target.id} must be a string literal")
                        found[target.id] = ""
        for name in REQUIRED_CONSTANTS:
            if name not in found:
                self.add(1, "missing-constant", f"missing module-level string constant {name}")
        for name, limit in MAX_CONSTANT_CHARS.items():
            if len(found.get(name, "")) > limit:
                self.add(1, "size", f"{name} has {len(found[name]):,} characters; at most {limit:,} allowed")
        return found

    def _check_declared_sizes(self, constants: dict[str, str], schema: dict[str, list[FieldSpec]]) -> None:
        """Each task-agent prompt's declared part (its instruction, the schema it shows, the always-on text)
        within ``DECLARED_PROMPT_MAX_CHARS``: past it the prompt would overflow a model the task runs on, and
        the endpoint's refusal would be the program's doing."""
        sizes: dict[str, int] = {}
        parts: dict[str, list[str]] = {}
        for prompt, constant, fields in DECLARED_PROMPTS:
            sizes[prompt] = sizes.get(prompt, 0) + len(constants.get(constant, ""))
            parts.setdefault(prompt, []).append(constant)
            if fields is not None:
                sizes[prompt] += sum(len(f.name) + len(f.type) + len(f.description) + 16 for f in schema.get(fields, []))
                parts[prompt].append(f"the fields of {fields}")
        for prompt, size in sizes.items():
            if size > DECLARED_PROMPT_MAX_CHARS:
                self.add(1, "prompt-size", f"{' and '.join(parts[prompt])} put {size:,} characters into every "
                                           f"{prompt} prompt; at most {DECLARED_PROMPT_MAX_CHARS:,} allowed")


_PARSING = threading.Lock()


class TreeTooLarge(ValueError):
    """A syntax tree beyond ``MAX_TREE_NODES`` or ``MAX_TREE_DEPTH``."""


@overload
def bounded_parse(source: str, mode: Literal["exec"] = "exec") -> ast.Module: ...
@overload
def bounded_parse(source: str, mode: Literal["eval"]) -> ast.Expression: ...
def bounded_parse(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse`` that raises only ``SyntaxError`` (for anything the parser refuses, null bytes and the
    parser's own recursion limit included) or ``TreeTooLarge``: every later walk of the tree is bounded."""
    try:
        # One parse at a time in a process: CPython 3.11's AST conversion keeps its recursion depth in shared
        # state that two threads parsing at once corrupt (SystemError "AST constructor recursion depth
        # mismatch", seen here with three evaluations in threads), and catch_warnings is process-wide too.
        with _PARSING, warnings.catch_warnings():  # the candidate's own warnings: nothing for the host to print
            warnings.simplefilter("ignore")
            tree = ast.parse(source, mode=mode)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as exc:
        if isinstance(exc, SyntaxError):
            raise
        what = "null bytes" if isinstance(exc, ValueError) else "nesting or size beyond the parser's limits"
        raise SyntaxError(f"the parser refused it: {what} ({type(exc).__name__})") from None
    stack: list[tuple[ast.AST, int]]
    nodes, deepest, stack = 0, 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        nodes += 1
        deepest = max(deepest, level)
        if nodes > MAX_TREE_NODES:
            raise TreeTooLarge(f"the program's syntax tree has more than {MAX_TREE_NODES:,} nodes")
        if deepest > MAX_TREE_DEPTH:
            raise TreeTooLarge(f"the program's syntax tree nests more than {MAX_TREE_DEPTH} levels deep")
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return tree


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _is_name(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _is_dataclass_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Name):
        return target.id == "dataclass"
    return isinstance(target, ast.Attribute) and target.attr == "dataclass"


def _is_classvar(annotation: ast.expr) -> bool:
    target = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return (isinstance(target, ast.Name) and target.id == "ClassVar") or (
        isinstance(target, ast.Attribute) and target.attr == "ClassVar"
    )


def _type_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return None  # string annotations are parsed by the caller
    return None


def _json_type(node: ast.expr) -> tuple[str, bool] | None:
    """(normalised type, optional) for a JSON-compatible annotation, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _json_type(bounded_parse(node.value, mode="eval").body)
        except (SyntaxError, TreeTooLarge):
            return None
    members = _union_members(node)
    if members is not None:
        non_none = [m for m in members if _type_name(m) != "None"]
        if len(non_none) != 1 or len(non_none) == len(members):
            return None
        inner = _json_value_type(non_none[0])
        return (inner, True) if inner else None
    inner = _json_value_type(node)
    return (inner, False) if inner else None


def _union_members(node: ast.expr) -> list[ast.expr] | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left = _union_members(node.left) or [node.left]
        right = _union_members(node.right) or [node.right]
        return left + right
    if isinstance(node, ast.Subscript) and _type_name(node.value) in {"Optional", "Union"}:
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if _type_name(node.value) == "Optional":
            return [*args, ast.Constant(value=None)]
        return list(args)
    return None


def _json_value_type(node: ast.expr) -> str | None:
    name = _type_name(node)
    if name in _JSON_SCALARS:
        return _JSON_SCALARS[name]
    if isinstance(node, ast.Subscript):
        outer = _type_name(node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer in {"list", "List"} and len(args) == 1:
            inner = _json_element_type(args[0])
            return f"list[{inner}]" if inner else None
        if outer in {"dict", "Dict"} and len(args) == 2 and _type_name(args[0]) == "str":
            inner = _json_element_type(args[1])
            return f"dict[str, {inner}]" if inner else None
    return None


def _json_element_type(node: ast.expr) -> str | None:
    parsed = _json_type(node)
    if parsed is None:
        return None
    type_, optional = parsed
    return f"Optional[{type_}]" if optional else type_


def _metadata_description(node: ast.expr | None) -> str:
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and key.value == "description":
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    return value.value
    return ""


def _methods_with_local_bases(
    cls: ast.ClassDef, classes: dict[str, ast.ClassDef], visits: list[int] | None = None,
) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Methods defined on ``cls`` or inherited from classes defined in the same file. Each class is resolved
    once: a lattice of classes (each with two bases that share theirs) has exponentially many paths but only
    as many classes and edges as its source holds, and walking paths made the checker run for minutes. Iterative,
    so a chain of a thousand classes is no recursion either; a base being resolved (a cycle) adds nothing.
    ``visits``: counts the bases looked at (the work), for the tests."""
    resolved: dict[str, dict[str, ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    resolving: set[str] = set()
    stack: list[ast.ClassDef] = [cls]
    while stack:
        current = stack[-1]
        if current.name in resolved:  # pushed by two classes before either resolved it
            stack.pop()
            continue
        resolving.add(current.name)
        bases = [classes[b.id] for b in current.bases if isinstance(b, ast.Name) and b.id in classes]
        if visits is not None:
            visits[0] += len(bases)
        pending = [b for b in bases if b.name not in resolved and b.name not in resolving]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        resolving.discard(current.name)
        methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for base in reversed(bases):
            methods.update(resolved.get(base.name, {}))
        for stmt in current.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods[stmt.name] = stmt
        resolved[current.name] = methods
    return resolved[cls.name]
