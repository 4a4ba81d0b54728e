"""From a reflection request to a checked child, or a discard with its reasons: what every reflector kind
(``mstar_ray.reflect.registry``) returns and the checks they share.

Every kind shares one path: a proposal (an LLM reply, or an offline mutation written as a V4A patch)
is applied to the parent, then checked (the contract, the ablation's frozen parts, novelty, a sandbox
smoke test). A failure goes back for another attempt with the full error, at most ``max_repairs`` times;
then the candidate is discarded and the caller logs why.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from mstar_ray.contract import REQUIRED_CONSTANTS, check_source, inspect_program
from mstar_ray.llm.usage import CallLog
from mstar_ray.program_ast import assigned_name, changed_pieces, unused_additions
from mstar_ray.program_id import ProgramIdentity, program_id
from mstar_ray.reflect.request import ALREADY_EVALUATED, NO_CHANGE, ReflectionRequest

SmokeTest = Callable[[str], "str | None"]
if TYPE_CHECKING:
    from mstar_ray.reflect.base import Reflecting


class Child(ProgramIdentity):
    """A program a reflection made from its parent (``iteration`` is the reflection's)."""

    patch: str | None
    edit_format: Literal["v4a", "function", "file", "mutation"]
    attempts: int
    errors: list[str] = []  # of the failed attempts before this one
    tolerances: list[str] = []  # fixes the tolerant reading had to make (V4A) or what it dropped (function)


class Discard(BaseModel):
    parent: str
    reason: str
    attempts: int
    errors: list[str]


class ReflectionOutcome(BaseModel):
    result: Child | Discard
    calls: list[CallLog] = []  # the reflector model's requests, for the llm_calls log
    guidance: str | None = None  # the request's rewrite (search.guidance): the new instruction text, if one came


def frozen_violation(parent: str, child: str, *, frozen_code: bool, frozen_instructions: bool) -> str | None:
    if not (frozen_code or frozen_instructions):
        return None
    before, after = inspect_program(parent).constants, inspect_program(child).constants
    if frozen_instructions and any(before[k] != after[k] for k in REQUIRED_CONSTANTS):
        return "the instruction constants are frozen in this run: change only the code"
    if frozen_code and _code_shape(parent) != _code_shape(child):
        return "the code is frozen in this run: change only the four instruction constants"
    return None


def _code_shape(source: str) -> str:
    """The program with the instruction constants' values blanked out (and COMMIT_MESSAGE dropped)."""
    tree = ast.parse(source)
    body = []
    for stmt in tree.body:
        target = stmt.targets[0].id if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name) else None
        if target == "COMMIT_MESSAGE":
            continue
        if target in REQUIRED_CONSTANTS and isinstance(stmt, ast.Assign):  # only an Assign has a target here
            stmt = ast.Assign(targets=stmt.targets, value=ast.Constant(""), lineno=0)
        body.append(stmt)
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def _same_code(parent: str, child: str) -> bool:
    """Equal but for layout and comments (a child that only reformats is no child)."""
    if child.strip() == parent.strip():
        return True
    try:
        return ast.dump(ast.parse(parent)) == ast.dump(ast.parse(child))
    except SyntaxError:
        return False


def no_change_error(unchanged: list[str]) -> str:
    """What a reflector is told when its reply changed nothing, naming what it gave back unchanged."""
    if not unchanged:
        return f"{NO_CHANGE}: change the code of the part you mean to improve"
    names = ", ".join(unchanged)
    return (f"{NO_CHANGE}: {names} in your reply {'is' if len(unchanged) == 1 else 'are'} the same code as in the "
            "program. Change the body of the part you mean to improve (or change another part)")


# Our own prompt text, which small models echo as their commit message (issue 15: a child's message was
# "Attempt 2 of 3 failed: ...", and the report labelled a family with it).
_ECHO = re.compile("|".join([r"attempt \d+ of \d+ failed", r"reply again with", r"what you change",
                             r"and why, one sentence", re.escape(NO_CHANGE), re.escape(ALREADY_EVALUATED),
                             r"breaks the contract", r"not valid python", r"smoke test", r"holds nothing to apply"]),
                   re.IGNORECASE)
MAX_NAMED_PIECES = 4


def commit_message(message: str, parent: str, child: str) -> str:
    """The model's message, or, when it has none, echoes our prompt or repeats the parent's own message (a
    program's COMMIT_MESSAGE constant is in the prompt), the parts of the program it changed."""
    message = message.strip()
    if message.startswith("<") and message.endswith(">"):  # our placeholder's brackets around its own words
        message = message[1:-1].strip()
    if message and not _ECHO.search(message) and message != _own_message(parent):
        return message
    changed = changed_pieces(parent, child)
    named = ", ".join(changed[:MAX_NAMED_PIECES]) + (" ..." if len(changed) > MAX_NAMED_PIECES else "")
    return f"changed {named} (no message of its own)" if changed else "(no message)"


def _own_message(source: str) -> str | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if (isinstance(node, (ast.Assign, ast.AnnAssign)) and assigned_name(node) == "COMMIT_MESSAGE"
                and isinstance(node.value, ast.Constant)):
            return str(node.value.value).strip()
    return None


def check_child(parent: str, child: str, request: ReflectionRequest, smoke: SmokeTest,
                unchanged: list[str] | None = None) -> str | None:
    """The full error a reflector needs to repair ``child``, or ``None`` when it may be evaluated;
    ``unchanged`` names the pieces the reply gave back as they were, for the no-change error."""
    if _same_code(parent, child):
        return no_change_error(unchanged or [])
    violations = check_source(child)
    if violations:
        return "the program breaks the contract:\n" + "\n".join(f"  {v}" for v in violations)
    unused = unused_additions(parent, child)
    if unused:
        return (f"{NO_CHANGE} in what it does: it only adds {', '.join(unused)}, which no code of the program uses "
                "(the agent calls only __init__, write and read). Change the code that should use it")
    frozen = frozen_violation(parent, child, frozen_code=request.frozen_code, frozen_instructions=request.frozen_instructions)
    if frozen:
        return frozen
    if program_id(child) in set(request.known_ids):
        return f"this exact program was {ALREADY_EVALUATED}: make a different change"
    return smoke(child)


def answer(reflector: Reflecting, request: ReflectionRequest, smoke: SmokeTest) -> tuple[Child | Discard, str | None]:
    """What a process hosting ``reflector`` does with a request: the reflection, then the meta-step of evolving
    instructions when the request asks for one (its new text, or none)."""
    result = reflector.reflect(request, smoke)
    return result, reflector.rewrite_guidance(request) if request.rewrite is not None else None
