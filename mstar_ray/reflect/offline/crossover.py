"""``crossover``: take a consistent unit (methods, the whole ``KnowledgeBase``, a helper function, a schema
dataclass or a constant's value) from another program of the population.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable, Collection
from dataclasses import dataclass

from mstar_ray.contract import LOGIC_CLASS, SCHEMA_CLASSES
from mstar_ray.program_ast import is_docstring
from mstar_ray.reflect.offline.engine import (
    _Edit, Mutation, NoMutation, _Source, _apply, _bindings, _code_functions, _comment_start,
    _constant_target, _indent_of, _method_attributes, _methods, _module_class, _reindent, _short_id,
    _valid,
)
from mstar_ray.reflect.offline.engine import _Function
from mstar_ray.reflect.offline.engine import _end_line
from mstar_ray.reflect.offline.engine import _constant_number
from mstar_ray.reflect.offline.names import _bound_names, _free_names_of

# Bounds on the work on two candidates' sources (untrusted: a chain of methods each needing the next made one
# crossover of 200 methods take minutes, cubic): a method unit grows to at most this many methods, each round a
# walk of the class (the seeds' largest unit is 10), and at most this many plans, each a parse and a contract
# check of its child, are tried (the seeds offer at most 8).
MAX_UNIT_METHODS = 16
MAX_PLANS = 16


def _class_level_names(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for stmt in cls.body:
        names |= _bound_names(stmt)
    return names


def _attribute_use(methods: dict[str, _Function], class_names: set[str]) -> tuple[set[str], set[str]]:
    """(attributes set or defined in the class, attributes read) over a class's methods."""
    assigned, loaded = set(class_names) | set(methods), set()
    for fn in methods.values():
        a, r = _method_attributes(fn)
        assigned |= a
        loaded |= r
    return assigned, loaded


def _missing_attributes(methods: dict[str, _Function], class_names: set[str]) -> set[str]:
    assigned, loaded = _attribute_use(methods, class_names)
    return loaded - assigned


def _unread_attributes(methods: dict[str, _Function], class_names: set[str]) -> set[str]:
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
        self.edits.append(_Edit(self.receiver.line_end(_end_line(cls)), self.receiver.line_end(_end_line(cls)), "\n" + block))
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
        last: ast.stmt | None = max((s for s in body if isinstance(s, (ast.Import, ast.ImportFrom))), key=_end_line, default=None)
        if last is None:
            last = body[0] if body and is_docstring(body[0]) else None
        offset = self.receiver.line_end(_end_line(last)) if last else 0
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
    while len(unit) <= MAX_UNIT_METHODS:  # each round walks the class: a longer chain is the whole-class plan's
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
    return None


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
        if mine is None or theirs is None:  # planned only where both have the class (_plans)
            return None
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
        if old is None or new is None:  # planned only where both bind the name (_plans)
            return None
        if not move.replace(old, new, old) or not move.carry_dependencies():
            return None
        fixed = _schema_fix(move.result(), donor)
        if fixed is None:
            return None
        return fixed[0], _describe_taken(label, tag, fixed[1], move.carried_note())

    return _Plan(build, f"statement:{name}")


# The statements that bind a name to a value (the first binding of a constant is one of them).
_VALUED = (ast.Assign, ast.AnnAssign, ast.AugAssign)


def _constant_plan(name: str) -> _Plan:
    def build(receiver: _Source, donor: _Source, tag: str) -> tuple[str, str] | None:
        old_stmt, new_stmt = _bindings(receiver.tree)[name], _bindings(donor.tree)[name]
        if not isinstance(old_stmt, _VALUED) or not isinstance(new_stmt, _VALUED):  # planned only for constants
            return None
        old, new = old_stmt.value, new_stmt.value
        if old is None or new is None:  # an annotation alone (``K: int``) holds no value to take
            return None
        start, end = receiver.span(old)
        child = _apply(receiver.text, [_Edit(start, end, donor.segment(new))])
        return child, f"take {name} = {donor.segment(new)} from parent #{tag} (crossover; was {receiver.segment(old)})"

    return _Plan(build, f"constant:{name}")


def _numeric_constants(tree: ast.Module) -> dict[str, ast.Constant]:
    """UPPER_CASE numeric module constants: name -> the number it holds (its last assignment)."""
    return {name: node for stmt in tree.body
            if (name := _constant_target(stmt)) is not None and (node := _constant_number(stmt)) is not None}


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
        mine_def = mine_defs.get(name)
        if isinstance(stmt, ast.FunctionDef) and isinstance(mine_def, ast.FunctionDef) and _different(mine_def, stmt):
            plans.append(_statement_plan(name, f"helper {name}()"))
    mine_numbers, theirs_numbers = _numeric_constants(receiver.tree), _numeric_constants(donor.tree)
    for name in sorted(mine_numbers.keys() & theirs_numbers.keys()):
        if mine_numbers[name].value != theirs_numbers[name].value:
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
    for plan in plans[:MAX_PLANS]:
        built = plan.build(receiver, donor, tag)
        if built is not None and _consistent(built[0]) and _valid(source, built[0], avoid):
            return Mutation("crossover", built[1], built[0])
    raise NoMutation("nothing in the donor can be taken consistently")
