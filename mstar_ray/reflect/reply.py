"""Reading the reflector's reply: its commit message, and whichever of a V4A patch, a whole program or
Python code blocks (definitions) it holds.

Models wrap patches in code fences, write several drafts and label the commit message in many ways;
this module only finds the pieces. Which piece is used, and whether it applies, is the edit format's
business (``mstar_ray.reflect.edit_formats``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from mstar_ray.reflect.v4a import BEGIN, END

MAX_COMMIT_CHARS = 200

_FENCE = re.compile(r"^ {0,3}```\s*([\w+.-]*)")
_PATCH_HEADER = re.compile(r"^\*\*\* (?:Update|Add) File:")
_COMMIT = re.compile(
    r"^[\s>#*_-]*(?:commit[ _-]?message|commit)\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(.*)$", re.IGNORECASE
)
_PYTHON_INFO = ("python", "py", "python3", "")
_CODE_START = re.compile(r"\s*(COMMIT_MESSAGE\s*=|def |class |import |from \w+ import |@\w)")


class ReplyError(ValueError):
    """A reply without the piece its edit format needs; the message says what was expected."""


@dataclass(frozen=True)
class ReflectorReply:
    commit_message: str
    patch: str | None  # the last "*** Begin Patch" ... "*** End Patch" block, markers included
    full_source: str | None  # only when there is no patch: the last ```python block with the program
    code_blocks: tuple[str, ...] = ()  # every ```python (or unlabelled) block outside a patch, in order
    unfenced: bool = False  # the reply was bare Python, without a ``` fence (read as one block)


@dataclass(frozen=True)
class _Span:
    start: int  # first line: an opening fence or a '*** Begin Patch'
    end: int  # last line, included: a closing fence (len(lines) if unclosed) or a '*** End Patch'
    info: str = ""

    def covers(self, i: int) -> bool:
        return self.start <= i <= self.end


def parse_reply(text: str) -> ReflectorReply:
    lines = text.replace("\r\n", "\n").split("\n")
    fences = _fences(lines)
    patches = _patch_spans(lines, fences)
    if not patches and not any(_inside(lines, f).strip() for f in fences):
        bare = _bare_code(lines)
        if bare is not None:
            return ReflectorReply(_loose_commit_message(lines), None,
                                  bare if "class KnowledgeBase" in bare else None, (bare,), unfenced=True)
    code = [f for f in fences if f.info in _PYTHON_INFO and not any(p.covers(f.start + 1) for p in patches)]
    blocks = tuple(_inside(lines, f) for f in code)
    patch = full_source = None
    chosen: _Span | None = None
    if patches:
        chosen = patches[-1]
        patch = "\n".join(lines[chosen.start : chosen.end + 1]) + "\n"
    else:
        programs = [f for f in code if "class KnowledgeBase" in _inside(lines, f)]
        if programs:
            chosen = programs[-1]
            full_source = _inside(lines, chosen)
        elif code:
            chosen = code[-1]
    message = _commit_message(lines, fences, patches + code, chosen) if chosen else _loose_commit_message(lines)
    return ReflectorReply(message, patch, full_source, blocks)


def _bare_code(lines: list[str]) -> str | None:
    """A reply that is Python without its fence (a 0.5B coder wrote the code and forgot the opening fence;
    a closing one may dangle at the end): its text, when it parses and defines something, or when it starts
    as code does (then the merge reports where it stops parsing, e.g. a reply cut off at max_tokens)."""
    body = [line for line in lines if not _FENCE.match(line)]
    text = "\n".join(body).strip("\n") + "\n"
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text if _CODE_START.match(text) else None
    defines = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
    return text if any(isinstance(node, defines) for node in tree.body) else None


def _inside(lines: list[str], fence: _Span) -> str:
    return "\n".join(lines[fence.start + 1 : fence.end]) + "\n"


def _loose_commit_message(lines: list[str]) -> str:
    """A reply with no block at all: its labelled line, if any."""
    for line in lines:
        match = _COMMIT.match(line)
        if match and _clean(match.group(1)):
            return _clean(match.group(1))[:MAX_COMMIT_CHARS]
    return ""


def _fences(lines: list[str]) -> list[_Span]:
    """Fenced blocks; an unclosed one (a reply cut short) runs to the end."""
    spans, opened, info = [], None, ""
    for i, line in enumerate(lines):
        match = _FENCE.match(line)
        if not match:
            continue
        if opened is None:
            opened, info = i, match.group(1).lower()
        elif not match.group(1):
            spans.append(_Span(opened, i, info))
            opened = None
    if opened is not None:
        spans.append(_Span(opened, len(lines), info))
    return spans


def _covering(i: int, spans: list[_Span]) -> _Span | None:
    return next((span for span in spans if span.covers(i)), None)


def _patch_spans(lines: list[str], fences: list[_Span]) -> list[_Span]:
    spans: list[_Span] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != BEGIN:
            i += 1
            continue
        fence = _covering(i, fences)
        # Without an End marker, the patch ends with its fence or with the reply (it was cut short).
        limit = fence.end if fence else len(lines)
        ends = [j for j in range(i + 1, limit) if lines[j].strip() == END]
        end = ends[0] if ends else max(j for j in range(i, limit) if lines[j].strip())
        spans.append(_Span(i, end))
        i = end + 1
    if spans:
        return spans
    # A fenced body with a file header but no markers: the tolerant reading of the patch adds them.
    return [
        _Span(fence.start + 1, fence.end - 1)
        for fence in fences
        if any(_PATCH_HEADER.match(line) for line in lines[fence.start + 1 : fence.end])
    ]


def _commit_message(lines: list[str], fences: list[_Span], blocks: list[_Span], chosen: _Span) -> str:
    """A labelled line (the last one before the chosen block, else the first after it), else the
    first line of prose before the block."""
    free = [i for i in range(len(lines)) if _covering(i, blocks) is None]
    labelled = [i for i in free if _COMMIT.match(lines[i])]
    before = [i for i in labelled if i < chosen.start]
    if labelled:
        i = before[-1] if before else labelled[0]
        label = _COMMIT.match(lines[i])
        assert label is not None  # ``labelled`` holds only the lines it matches
        message = _clean(label.group(1))
        if not message:  # the label on a line of its own: the message follows
            message = next((_clean(lines[j]) for j in free if j > i and _clean(lines[j])), "")
        return message[:MAX_COMMIT_CHARS]
    prose = (_clean(lines[i]) for i in free if i < chosen.start and _covering(i, fences) is None)
    return next((line for line in prose if line), "")[:MAX_COMMIT_CHARS]


def _clean(line: str) -> str:
    return line.strip().lstrip("#>*-_ ").strip().strip("*_`\"'").strip()
