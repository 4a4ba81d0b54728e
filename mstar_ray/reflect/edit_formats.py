"""How a reflector writes its change: the three edit formats, each with its prompt wording and its reading.

- ``v4a``: one V4A patch (strong models; the reference's format). A patch the strict reading refuses is
  read tolerantly (``v4a.apply_patch(tolerant=True)``) and the fixes it needed are logged.
- ``function``: whole ``def``/``class`` blocks and constants, spliced in by name (``function_edit``);
  small models can write a function where they cannot write a diff.
- ``file``: the whole program.

The format asked for comes first, but a reply in another format is still read (a model asked for a patch
that returns the whole program has still proposed a child); the result names the format actually read,
and that is what the log records. Every result then goes through the same checks, smoke test and repairs.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Literal

from mstar_ray.reflect.function_edit import KNOWLEDGE_BASE, EditError, dedent_block, merge_definitions
from mstar_ray.reflect.reply import ReflectorReply, ReplyError, parse_reply
from mstar_ray.reflect.v4a import BEGIN, END, PatchError, apply_patch

EditFormat = Literal["v4a", "function", "file"]
EDIT_FORMATS: tuple[EditFormat, ...] = ("v4a", "function", "file")

# Reflector models too small to write V4A (OFFLINE.md, last section): names matching this get ``function``
# when the config says ``auto``. A parameter count in the name up to 3B, or a family known to be small.
_SMALL_MODEL = re.compile(r"(?<![\d.])(?:0?\.\d+|[123](?:\.\d+)?)\s*b\b|\d+\s*m\b|smollm|tinyllama|phi-?1", re.IGNORECASE)

_INSTRUCTIONS: dict[EditFormat, str] = {
    "v4a": """Reply with one line "COMMIT_MESSAGE: <what you changed and why, one sentence>", then ONE patch
in V4A format that edits program.py:
*** Begin Patch
*** Update File: program.py
@@ <a line of the program just above the change, e.g. def read(self, query: Query) -> str:>
 <unchanged line, prefixed by one space>
-<line to remove, prefixed by ->
+<line to add, prefixed by +>
*** End Patch
Copy context lines exactly, with their indentation after the one-character prefix. Make one focused change.""",
    "function": """Reply with ONE ```python block and nothing else. Its first line is
COMMIT_MESSAGE = "<what you change and why, one sentence>"
and after it the block holds only what you change, each piece complete:
- a whole method, e.g. `def read(self, query: Query) -> str:` with its full body (it replaces the method
  of that name in KnowledgeBase), or a whole class or function (it replaces the one of that name, or is added);
- a constant assignment, e.g. `INSTRUCTION_QUERY = "..."` (it replaces the constant of that name);
- any new import.
Do not write a diff and do not repeat code you leave unchanged. Make one focused change.""",
    "file": """Reply with one line "COMMIT_MESSAGE: <what you changed and why, one sentence>", then the WHOLE
new program in one ```python block: every import, constant, dataclass and class, changed or not.
Make one focused change.""",
}

# The function format asks for the code block first, the commit message inside it: a 0.5B coder asked for a
# "COMMIT_MESSAGE: ..." line and then a block wrote the line and stopped (24 replies in 24, issue 15).
# The worked example of the function format is the parent's own shortest required method, as it is: it
# shows the exact form (a complete method, the program's signature and indentation) yet can never be
# pasted as a child, since a copy leaves the program as it was and is refused as such. A fixed example
# (newest chunks first) was pasted as the "change" by small models (issue 15), and one with a "\n" in a
# non-raw string showed them a broken string literal.
_EXAMPLE_INTRO = ("The form of such a reply, shown with {name}() exactly as it is now: a reply must CHANGE the "
                  "code it shows (this one, unchanged, would be refused):")


def instructions(edit_format: EditFormat, parent: str) -> str:
    """How to write the change, for the reflection prompt of ``parent``."""
    text = _INSTRUCTIONS[edit_format]
    if edit_format != "function":
        return text
    example = _method_example(parent)
    if example is None:
        return text
    name, code = example
    return (f"{text}\n{_EXAMPLE_INTRO.format(name=name)}\n```python\n"
            f"COMMIT_MESSAGE = \"<what you change in {name}() and why>\"\n{code}\n```")


def _method_example(parent: str) -> tuple[str, str] | None:
    """(name, source) of the shorter of KnowledgeBase.read and .write in ``parent``, at column 0."""
    try:
        tree = ast.parse(parent)
    except SyntaxError:
        return None
    lines = parent.splitlines()
    methods = [m for c in tree.body if isinstance(c, ast.ClassDef) and c.name == KNOWLEDGE_BASE for m in c.body
               if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name in ("read", "write")]
    if not methods:
        return None
    method = min(methods, key=lambda m: ((m.end_lineno or m.lineno) - m.lineno, m.name))  # parsed: end_lineno is set
    first = min([method.lineno, *(d.lineno for d in method.decorator_list)])
    return method.name, dedent_block("\n".join(lines[first - 1 : method.end_lineno])).rstrip()


REPAIR_ASK: dict[EditFormat, str] = {
    "v4a": "a COMMIT_MESSAGE line and a corrected patch against the ORIGINAL program",
    "function": ('ONE ```python block: its first line COMMIT_MESSAGE = "...", then corrected complete definitions '
                 "(they are spliced into the ORIGINAL program)"),
    "file": "a COMMIT_MESSAGE line and the corrected whole program",
}


# What else a reply is read as when it is not in the format asked for. Definitions merge by name, so a
# whole program merged as definitions keeps anything the model left out: only ``file`` takes it as is.
_FALLBACKS: dict[EditFormat, tuple[EditFormat, ...]] = {
    "v4a": ("v4a", "file", "function"),
    "function": ("function", "v4a"),
    "file": ("file", "function", "v4a"),
}


@dataclass
class Edit:
    source: str
    commit_message: str
    edit_format: EditFormat  # the format the reply was read in
    text: str | None = None  # the patch, or the definitions; None for a whole file
    tolerances: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)  # pieces the reply gave back exactly as they were


def resolve_format(configured: str, model: str) -> EditFormat:
    """``auto`` picks ``function`` for models known to be too small for V4A, ``v4a`` otherwise."""
    if configured != "auto":
        return configured  # type: ignore[return-value]  # validated by the config
    return "function" if _SMALL_MODEL.search(model) else "v4a"


def read_edit(parent: str, reply_text: str, preferred: EditFormat) -> Edit:
    """The child a reply proposes, read in ``preferred`` first, then in whatever else it holds.
    Raises ``ReplyError``/``PatchError``/``EditError`` with a message meant for the reflector."""
    reply = parse_reply(reply_text)
    readers = {"v4a": _as_patch, "function": _as_definitions, "file": _as_file}
    first_error: Exception | None = None
    for name in _FALLBACKS[preferred]:
        try:
            edit = readers[name](parent, reply)
        except (ReplyError, PatchError, EditError) as exc:
            first_error = first_error or exc
            continue
        if edit is not None:
            return edit
    if first_error is not None:
        raise first_error
    raise ReplyError(f"the reply holds nothing to apply. {_expected(preferred)}")


def _expected(preferred: EditFormat) -> str:
    return {
        "v4a": f"Expected a V4A patch: a block from a line '{BEGIN}' to a line '{END}'.",
        "function": "Expected a ```python block with whole def/class blocks or constant assignments.",
        "file": "Expected the whole program in one ```python block containing 'class KnowledgeBase'.",
    }[preferred]


def _as_patch(parent: str, reply: ReflectorReply) -> Edit | None:
    """Strict reading first. The tolerant one is used when the strict one fails, or when the strict one
    applies but leaves code that does not parse (added lines shifted by the prefix apply strictly)."""
    if reply.patch is None:
        return None
    try:
        result = apply_patch(parent, reply.patch)
    except PatchError as strict:
        try:
            result = apply_patch(parent, reply.patch, tolerant=True)
        except PatchError:
            raise strict from None
    else:
        if not _parses(result.source):
            try:
                tolerant = apply_patch(parent, reply.patch, tolerant=True)
            except PatchError:
                tolerant = None
            if tolerant is not None and _parses(tolerant.source):
                result = tolerant
    return Edit(result.source, reply.commit_message, "v4a", reply.patch, list(result.tolerances))


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def _as_definitions(parent: str, reply: ReflectorReply) -> Edit | None:
    if not reply.code_blocks:
        return None
    changed: set[str]
    source, message, tolerances, unchanged, changed = parent, reply.commit_message, [], [], set()
    for block in reply.code_blocks:
        merged = merge_definitions(source, block, original=parent, changed=changed)
        source, message = merged.source, merged.commit_message or message
        tolerances += merged.tolerances
        unchanged += merged.unchanged
    unchanged = [name for name in dict.fromkeys(unchanged) if name not in changed]
    if reply.unfenced:
        tolerances.insert(0, "read: the reply's code had no ``` fence")
    return Edit(source, message, "function", "\n".join(reply.code_blocks), tolerances, unchanged)


def _as_file(parent: str, reply: ReflectorReply) -> Edit | None:
    if reply.full_source is None:
        return None
    return Edit(reply.full_source, reply.commit_message, "file")
