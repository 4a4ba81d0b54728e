"""V4A patches (the ``apply_patch`` format of OpenAI's Codex) for memory programs: apply and generate.

Why our own implementation rather than the ``codex-apply-patch`` wheel that the M★ reference uses: that
package ships a compiled wheel only for CPython 3.11 on x86_64, which would tie the project to one
interpreter and one architecture; and it reads patches strictly only, while small reflector models make
a few well-known mistakes (a copied ``@@ ... @@`` placeholder, unified-diff line numbers, indentation
off by one after the prefix, missing markers, code fences) that we want to read in a *tolerant* mode,
naming every fix so that callers can log it.

The format, for our single file (the program; the name written in the patch does not matter)::

    *** Begin Patch
    *** Update File: program.py
    @@ class KnowledgeBase:
    @@     def read(self, query: Query) -> str:
     context line
    -removed line
    +added line
    *** End Patch

Strict reading, as the reference tool reads it:

- A hunk starts with one or more ``@@`` lines (the first hunk may omit it); the text after ``@@`` is an
  anchor, a program line that must be found, in order and ignoring surrounding whitespace, before the
  hunk's lines. Hunks apply in order, each searched from where the previous one ended; the first
  match wins.
- Context and removed lines match exactly (fuzz 0), else ignoring trailing whitespace (fuzz 1), else
  ignoring surrounding whitespace (fuzz 2); context lines keep the program's text. Two differences
  from the reference: a fuzz-2 match whose indentation differs is refused when the hunk adds lines,
  because their indentation cannot be trusted then; and several ``@@`` lines in a row are allowed.
- An empty line is an empty context line (editors strip the lone space); blank context lines ending a
  hunk are dropped if the hunk is not found with them.
- ``*** End of File`` after a hunk makes it match at the end of the program first.
- ``*** Add File:`` (every line ``+``) replaces the whole program and counts as one hunk;
  ``*** Delete File:`` and a second file section are errors.

Tolerant reading adds, each reported in ``PatchResult.tolerances`` as ``"name: detail"``: ``fence``
(``` lines dropped), ``missing_begin``/``missing_end``/``outside_text`` (markers missing, text around
them), ``missing_header`` (no ``*** Update File:``), ``diff_file_header`` (``---``/``+++`` lines),
``diff_line_numbers``/``placeholder_anchor``/``anchor_dropped`` (an ``@@`` line with numbers, ``...``
or a second ``@@``: its text is used, also as the start of a program line, if found, else the anchor
is dropped), ``anchor_repeated`` (the anchor line is also the hunk's first context line),
``unprefixed_context`` (a line without prefix read as context), ``indentation`` and ``reindent``
(lines matched only with indentation ignored; added lines shifted onto the program's indentation grid),
and ``trailing_blank``/``unprefixed_add`` in an Add File section.
"""

from __future__ import annotations

import difflib
import heapq
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from mstar_ray.line_diff import align

BEGIN = "*** Begin Patch"
END = "*** End Patch"
END_OF_FILE = "*** End of File"
MAX_ERROR_CHARS = 1500

_HEADER = re.compile(r"^\*\*\* (Update|Add|Delete) File:")
_FENCE = re.compile(r"^```[\w+.-]*\s*$")
_DIFF_FILE_HEADER = re.compile(r"^(?:---|\+\+\+) \S")
_DIFF_NUMBERS = re.compile(r"-\d+(?:,\d+)?\s+\+\d+(?:,\d+)?")
_DOTS = re.compile(r"^(?:\.\.\.|…|\s)+|(?:\.\.\.|…|\s)+$")
_DEF_OR_CLASS = re.compile(r"^\s*(?:async\s+def|def|class)\s")
# A line ending in one of these continues a bracketed expression: its successor's indentation is free.
_CONTINUES = ("(", "[", "{", ",", "\\")
# Fuzz levels, in the order tried: exact, trailing whitespace ignored, surrounding whitespace ignored.
_LEVELS: tuple[Callable[[str], str], ...] = (lambda s: s, str.rstrip, str.strip)
_NEAREST_CHARS, _NEAREST_TRIED = 200, 64  # see _nearest
MAX_LEAD_TRIES = 32  # leading context lengths make_patch tries before taking all the lines since the last hunk
_FIX_HINT = "After the one-character prefix (' ', '-' or '+') copy the program's line exactly."


class PatchError(ValueError):
    """A patch that cannot be read or applied. The message is sent back to the reflector to repair
    the patch, so it names the hunk and the patch line and shows the nearest program line."""

    def __init__(self, message: str) -> None:
        if len(message) > MAX_ERROR_CHARS:
            message = message[: MAX_ERROR_CHARS - 4] + " ..."
        super().__init__(message)


@dataclass(frozen=True)
class PatchResult:
    source: str
    hunks: int
    fuzz: int  # the largest fuzz level any hunk needed (0, 1 or 2)
    tolerances: list[str] = field(default_factory=list)  # "name: detail", one per tolerant fix


@dataclass
class _Line:
    kind: str  # " ", "-" or "+"
    text: str
    number: int  # 1-based line of the patch
    unprefixed: bool = False


@dataclass
class _Anchor:
    raw: str
    number: int

    @property
    def text(self) -> str:
        return self.raw[2:].strip()


@dataclass
class _Hunk:
    number: int
    line: int
    anchors: list[_Anchor] = field(default_factory=list)
    body: list[_Line] = field(default_factory=list)
    eof: bool = False


@dataclass
class _Parsed:
    replacement: list[str] | None  # the lines of an Add File section
    hunks: list[_Hunk]


@dataclass
class _Placement:
    start: int
    fuzz: int
    body: list[_Line]


# ---------------------------------------------------------------------------------------------------
# Lines and indentation
# ---------------------------------------------------------------------------------------------------


def _split(text: str) -> list[str]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _ends_with_newline(source: str) -> bool:
    # An empty program gets the newline convention of every program file.
    return source == "" or source.endswith("\n")


def _join(lines: Sequence[str], newline: bool) -> str:
    return "\n".join(lines) + ("\n" if newline and lines else "")


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def _show(text: str, limit: int = 100) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _indent_unit(lines: Sequence[str]) -> int:
    indents = [_indent(line) for line in lines if line.strip() and _indent(line)]
    for unit in (4, 2):
        if indents and sum(i % unit == 0 for i in indents) >= 0.8 * len(indents):
            return unit
    return 1


def _reindent(text: str, shift: int) -> str:
    if not text.strip() or shift == 0:
        return text
    if shift > 0:
        return " " * shift + text
    spaces = len(text) - len(text.lstrip(" "))
    return text[min(spaces, -shift) :]


# ---------------------------------------------------------------------------------------------------
# Reading a patch
# ---------------------------------------------------------------------------------------------------


def _parse(patch: str, tolerant: bool, notes: list[str]) -> _Parsed:
    numbered = list(enumerate(patch.replace("\r\n", "\n").split("\n"), start=1))
    if tolerant:
        numbered = _drop_fences(numbered, notes)
    inner = _between_markers(numbered, tolerant, notes)
    kind, rest = _file_section(inner, tolerant, notes)
    if kind == "Add":
        return _Parsed(_read_add(rest, tolerant, notes), [])
    return _Parsed(None, _read_hunks(rest, tolerant, notes))


def _drop_fences(numbered: list[tuple[int, str]], notes: list[str]) -> list[tuple[int, str]]:
    # A bare fence line is never a valid body line (those start with a prefix), so dropping is safe.
    kept = [(n, line) for n, line in numbered if not _FENCE.match(line)]
    if len(kept) < len(numbered):
        notes.append("fence: ``` lines around the patch ignored")
    return kept


def _between_markers(
    numbered: list[tuple[int, str]], tolerant: bool, notes: list[str]
) -> list[tuple[int, str]]:
    content = [i for i, (_, line) in enumerate(numbered) if line.strip()]
    if not content:
        raise PatchError(
            f"the patch is empty: expected a line '{BEGIN}', the file section, and a line '{END}'"
        )
    if not tolerant:
        first, last = numbered[content[0]][1], numbered[content[-1]][1]
        if first.rstrip() != BEGIN or last.rstrip() != END or len(content) < 2:
            hint = " (remove the ``` fence lines)" if _FENCE.match(first) else ""
            raise PatchError(
                f"the patch must start with a line '{BEGIN}' and end with a line '{END}'{hint}; "
                f"it starts with {_show(first)} and ends with {_show(last)}"
            )
        return numbered[content[0] + 1 : content[-1]]
    begins = [i for i, (_, line) in enumerate(numbered) if line.strip() == BEGIN]
    start = begins[0] + 1 if begins else _first_body_line(numbered)
    if not begins:
        notes.append(f"missing_begin: no '{BEGIN}' line; the patch read from line {numbered[start][0]}")
    ends = [i for i, (_, line) in enumerate(numbered) if line.strip() == END and i >= start]
    stop = ends[-1] if ends else len(numbered)
    if not ends:
        notes.append(f"missing_end: no '{END}' line; the patch read to its last line")
    before = begins[0] if begins else start
    if any(i < before or i > stop for i in content):
        notes.append("outside_text: lines outside the patch markers ignored")
    return numbered[start:stop]


def _first_body_line(numbered: list[tuple[int, str]]) -> int:
    for i, (_, line) in enumerate(numbered):
        if _HEADER.match(line.rstrip()) or line.startswith("@@"):
            return i
    raise PatchError(f"no V4A patch found: no '{BEGIN}', '*** Update File:' or '@@' line")


def _file_section(
    inner: list[tuple[int, str]], tolerant: bool, notes: list[str]
) -> tuple[str, list[tuple[int, str]]]:
    """The kind of the one file section ("Update" or "Add") and its lines."""
    headers = [(i, n, m.group(1)) for i, (n, line) in enumerate(inner) if (m := _HEADER.match(line.rstrip()))]
    for _, n, kind in headers:
        if kind == "Delete":
            raise PatchError(
                f"patch line {n}: '*** Delete File' is not allowed: there is one program, which a patch "
                "updates ('*** Update File:') or replaces whole ('*** Add File:')"
            )
    if len(headers) > 1:
        raise PatchError(
            f"patch line {headers[1][1]}: a second file section; a patch changes only the program, "
            "in one '*** Update File:' section"
        )
    first = next((i for i, (_, line) in enumerate(inner) if line.strip()), None)
    if first is None:
        raise PatchError(
            f"the patch has no file section: after '{BEGIN}' write '*** Update File: program.py'"
        )
    if headers and headers[0][0] == first:
        return headers[0][2], inner[first + 1 :]
    if tolerant and not headers:
        notes.append("missing_header: no '*** Update File:' line; the body read as an update of the program")
        return "Update", inner
    n, line = inner[first]
    raise PatchError(
        f"patch line {n}: expected '*** Update File: program.py' right after '{BEGIN}', found {_show(line)}"
    )


def _read_add(lines: list[tuple[int, str]], tolerant: bool, notes: list[str]) -> list[str]:
    if tolerant and lines and not lines[-1][1].strip():
        while lines and not lines[-1][1].strip():
            lines = lines[:-1]
        notes.append("trailing_blank: blank lines at the end of the Add File section ignored")
    out, loose = [], []
    for n, line in lines:
        if line.startswith("+"):
            out.append(line[1:])
        elif tolerant:
            out.append(line)
            loose.append(str(n))
        else:
            raise PatchError(
                f"patch line {n}: every line of an '*** Add File' section starts with '+', "
                f"found {_show(line)}"
            )
    if loose:
        notes.append(f"unprefixed_add: patch lines {', '.join(loose)} had no '+'; read as they are")
    if not out:
        raise PatchError("the '*** Add File' section has no lines")
    return out


def _read_hunks(lines: list[tuple[int, str]], tolerant: bool, notes: list[str]) -> list[_Hunk]:
    hunks: list[_Hunk] = []
    for n, line in lines:
        current = hunks[-1] if hunks else None
        if line.startswith("@@"):
            if current is None or current.body:
                current = _Hunk(len(hunks) + 1, n)
                hunks.append(current)
            current.anchors.append(_Anchor(line.rstrip(), n))
        elif line.rstrip() == END_OF_FILE:
            if current is None or not current.body:
                raise PatchError(f"patch line {n}: '{END_OF_FILE}' must follow the lines of a hunk")
            current.eof = True
        elif line.startswith("***"):
            raise PatchError(
                f"patch line {n}: unexpected {_show(line)}; a file section holds only '@@', ' ', '-', '+' "
                f"and '{END_OF_FILE}' lines"
            )
        elif (current is None or current.eof) and not line.strip():
            continue  # a blank line before the first hunk or after End of File is layout, not context
        elif current is not None and current.eof:
            raise PatchError(f"patch line {n}: lines after '{END_OF_FILE}' need an '@@' line first")
        elif tolerant and current is None and _DIFF_FILE_HEADER.match(line):
            notes.append(f"diff_file_header: unified-diff header {_show(line)} ignored")
        else:
            if current is None:
                current = _Hunk(1, n)
                hunks.append(current)
            current.body.append(_body_line(n, line, current.number, tolerant))
    _check_hunks(hunks, notes)
    return hunks


def _body_line(n: int, line: str, hunk: int, tolerant: bool) -> _Line:
    if line == "":
        return _Line(" ", "", n)
    if line[0] in " -+":
        return _Line(line[0], line[1:], n)
    if tolerant:
        return _Line(" ", line, n, unprefixed=True)
    raise PatchError(
        f"hunk {hunk} (patch line {n}): {_show(line)} starts with neither ' ' (context), '-' (remove) "
        "nor '+' (add)"
    )


def _check_hunks(hunks: list[_Hunk], notes: list[str]) -> None:
    if not hunks:
        raise PatchError("the patch has no hunks: after '*** Update File:' write '@@' and the changed lines")
    for hunk in hunks:
        if not hunk.body:
            raise PatchError(
                f"hunk {hunk.number} (patch line {hunk.line}) has no lines after its '@@' line(s)"
            )
        loose = [str(line.number) for line in hunk.body if line.unprefixed]
        if loose:
            notes.append(
                f"unprefixed_context: hunk {hunk.number}, patch lines {', '.join(loose)} had no "
                "' ', '-' or '+' prefix; read as context"
            )
    if not any(line.kind != " " for hunk in hunks for line in hunk.body):
        raise PatchError("the patch changes nothing: no hunk has a '-' or '+' line")


# ---------------------------------------------------------------------------------------------------
# Finding anchors and hunks in the program
# ---------------------------------------------------------------------------------------------------


def _find_line(lines: Sequence[str], text: str, start: int, *, prefix: bool = False) -> int | None:
    for i in range(start, len(lines)):
        line = lines[i].strip()
        if line == text or (prefix and line.startswith(text)):
            return i
    return None


def _find_block(
    lines: Sequence[str], block: Sequence[str], start: int, eof: bool, end: int | None = None
) -> tuple[int, int] | None:
    """Where ``block`` first occurs at or after ``start`` (and within ``lines[:end]``), and the fuzz level that
    found it. Found in time linear in the lines searched, whatever they repeat (``_first_occurrence``)."""
    if not block:
        return (len(lines) if eof else start), 0
    last = len(lines) - len(block)
    # Like the reference tool, a hunk marked End of File tries the end first, at every fuzz level.
    if eof and last >= start:
        for level, norm in enumerate(_LEVELS):
            if all(norm(lines[last + i]) == norm(want) for i, want in enumerate(block)):
                return last, level
    end = len(lines) if end is None else min(end, len(lines))
    for level, norm in enumerate(_LEVELS):
        found = _first_occurrence([norm(line) for line in lines[start:end]], [norm(line) for line in block])
        if found is not None:
            return start + found, level
    return None


def _first_occurrence(text: list[str], pattern: list[str]) -> int | None:
    """Knuth-Morris-Pratt: the first index where ``pattern`` occurs in ``text``, in ``len(text) + len(pattern)``
    comparisons at most twice over (a candidate program's lines may repeat to make a naive scan quadratic)."""
    border = [0] * len(pattern)
    k = 0
    for i in range(1, len(pattern)):
        while k and pattern[i] != pattern[k]:
            k = border[k - 1]
        if pattern[i] == pattern[k]:
            k += 1
        border[i] = k
    k = 0
    for i, line in enumerate(text):
        while k and line != pattern[k]:
            k = border[k - 1]
        if line == pattern[k]:
            k += 1
        if k == len(pattern):
            return i - k + 1
    return None


def _nearest(lines: Sequence[str], text: str) -> int | None:
    """The index of the program line most like ``text``, for error messages. The lines are visited in decreasing
    order of ``quick_ratio`` (an upper bound of the similarity, linear in a line) until none left can beat the
    best found, at most ``_NEAREST_TRIED`` similarities computed, each of lines cut to ``_NEAREST_CHARS``: a
    program's or a patch's lines (both untrusted) cannot make the message cost more than that."""
    wanted = text.strip()[:_NEAREST_CHARS]
    bounds = difflib.SequenceMatcher(None, "", wanted)  # the counts of ``wanted`` made once, for every line
    ranked = []
    for i, line in enumerate(lines):
        if line.strip():
            bounds.set_seq1(line.strip()[:_NEAREST_CHARS])
            ranked.append((bounds.quick_ratio(), -i))
    best = None
    for bound, minus_i in heapq.nlargest(_NEAREST_TRIED, ranked):
        if best is not None and bound < best[0]:
            break
        found = (difflib.SequenceMatcher(None, wanted, lines[-minus_i].strip()[:_NEAREST_CHARS]).ratio(), minus_i)
        best = found if best is None else max(best, found)
    return None if best is None else -best[1]


def _nearest_note(lines: Sequence[str], text: str) -> str:
    i = _nearest(lines, text)
    return "" if i is None else f"; the nearest program line is {i + 1}: {_show(lines[i])}"


def _seek_anchors(
    lines: Sequence[str], hunk: _Hunk, cursor: int, tolerant: bool, notes: list[str]
) -> tuple[int, int | None]:
    """Where the hunk's search starts, and the line of its last anchor (None when there is none)."""
    start, last = cursor, None
    for anchor in hunk.anchors:
        if not anchor.text:
            continue
        k = _find_line(lines, anchor.text, start)
        if k is None and tolerant:
            k = _tolerant_anchor(lines, anchor, start, hunk, notes)
        elif k is None:
            raise PatchError(_anchor_message(lines, anchor, start, hunk))
        if k is not None:
            start, last = k + 1, k
    return start, last


def _tolerant_anchor(
    lines: Sequence[str], anchor: _Anchor, start: int, hunk: _Hunk, notes: list[str]
) -> int | None:
    """Read a malformed ``@@`` line: drop line numbers and ``...``, try the text around a second
    ``@@`` (also as the start of a program line, since models cut it short), else drop the anchor."""
    parts = [anchor.text]
    if "@@" in anchor.text:
        inner, _, after = anchor.text.partition("@@")
        parts = [after.strip(), inner.strip()]
    numbers = [part for part in parts if _DIFF_NUMBERS.fullmatch(part)]
    texts = [part for part in parts if part not in numbers]
    candidates = [_DOTS.sub("", part) for part in texts]
    placeholder = len(parts) > 1 or candidates != texts
    name = "diff_line_numbers" if numbers else "placeholder_anchor" if placeholder else "anchor_dropped"
    for candidate in filter(None, candidates):
        k = _find_line(lines, candidate, start)
        if k is None and len(candidate) >= 4:
            k = _find_line(lines, candidate, start, prefix=True)
        if k is not None:
            notes.append(f"{name}: hunk {hunk.number}, {_show(anchor.raw)} read as program line {k + 1}")
            return k
    notes.append(f"{name}: hunk {hunk.number}, {_show(anchor.raw)} not found in the program; ignored")
    return None


def _anchor_message(lines: Sequence[str], anchor: _Anchor, start: int, hunk: _Hunk) -> str:
    where = f" after program line {start}" if start else ""
    malformed = "@@" in anchor.text or _DIFF_NUMBERS.search(anchor.text) or "..." in anchor.text
    return (
        f"hunk {hunk.number} (patch line {anchor.number}): anchor {_show(anchor.raw)} not found in the "
        f"program{where}{'' if malformed else _nearest_note(lines, anchor.text)}. An '@@' line holds nothing "
        "or the text of one program line (such as a def or class line)"
        + (", never line numbers, '...' or a second '@@'." if malformed else ".")
    )


def _place(lines: Sequence[str], hunk: _Hunk, cursor: int, tolerant: bool, notes: list[str]) -> _Placement:
    start, anchor_line = _seek_anchors(lines, hunk, cursor, tolerant, notes)
    # Like the reference tool, retry without trailing blank context lines: a blank line left before
    # the next '@@' or '*** End Patch' is layout far more often than context.
    trimmed = _trim_blank_tail(hunk.body)
    for body in [hunk.body] + ([trimmed] if len(trimmed) < len(hunk.body) else []):
        old = [line.text for line in body if line.kind != "+"]
        found = _find_block(lines, old, start, hunk.eof)
        if found is None and tolerant and anchor_line is not None and old:
            # Models often repeat the anchor as the hunk's first context line.
            found = _find_block(lines, old, anchor_line, hunk.eof)
            if found is not None:
                notes.append(f"anchor_repeated: hunk {hunk.number} starts at its own anchor line")
        if found is not None:
            return _Placement(found[0], found[1], body)
    raise PatchError(_not_found_message(lines, hunk, start))


def _trim_blank_tail(body: list[_Line]) -> list[_Line]:
    end = len(body)
    while end and body[end - 1].kind == " " and not body[end - 1].text.strip():
        end -= 1
    return body[:end]


def _not_found_message(lines: Sequence[str], hunk: _Hunk, start: int) -> str:
    old = [line for line in hunk.body if line.kind != "+"]
    texts = [line.text for line in old]
    where = f" after program line {start}" if start else ""
    head = (
        f"hunk {hunk.number} (patch line {hunk.line}): its context and '-' lines were not found "
        f"in the program{where}."
    )
    shown = "\n".join(f"  {line.kind}{line.text[:100]}" for line in old[:8]) + (
        "\n  ..." if len(old) > 8 else ""
    )
    earlier = _find_block(lines, texts, 0, False)
    if earlier is not None:
        detail = (
            f"They occur at program line {earlier[0] + 1}, before where this hunk's search starts: "
            "hunks must "
            "follow the program's order, each after the previous one and after its anchors."
        )
    else:
        detail = _first_mismatch(lines, old, start) + " " + _FIX_HINT
    return f"{head}\nLines sought:\n{shown}\n{detail}"


def _first_mismatch(lines: Sequence[str], old: list[_Line], start: int) -> str:
    """Describe the longest run of the hunk's lines that does occur, and the line that breaks it."""
    best_pos, best_len = start, 0
    for pos in range(start, len(lines)):
        length = 0
        while (
            length < len(old)
            and pos + length < len(lines)
            and (lines[pos + length].strip() == old[length].text.strip())
        ):
            length += 1
        if length > best_len:
            best_pos, best_len = pos, length
    bad = old[best_len]
    if best_len == 0:
        nearest = _nearest_note(lines, bad.text)
        return f"No program line matches patch line {bad.number} {_show(bad.text)}{nearest}."
    first = old[0].number
    stop = best_pos + best_len
    there = (
        f"program line {stop + 1} is {_show(lines[stop])}" if stop < len(lines) else "the program ends there"
    )
    return (
        f"Patch {_span(first, old[best_len - 1].number)} = program {_span(best_pos + 1, stop)}, but patch "
        f"line {bad.number} {_show(bad.text)} does not match: {there}{_nearest_note(lines, bad.text)}."
    )


def _span(first: int, last: int) -> str:
    return f"line {first}" if first == last else f"lines {first}-{last}"


# ---------------------------------------------------------------------------------------------------
# Applying
# ---------------------------------------------------------------------------------------------------


def apply_patch(source: str, patch: str, *, tolerant: bool = False) -> PatchResult:
    """Apply a V4A ``patch`` to the program ``source``; raise PatchError saying what to repair.

    ``tolerant`` reads the documented mistakes of small models (see the module docstring) and names
    each fix in ``PatchResult.tolerances``; callers use it only after a strict reading failed.
    """
    notes: list[str] = []
    parsed = _parse(patch, tolerant, notes)
    if parsed.replacement is not None:
        return PatchResult(_join(parsed.replacement, True), 1, 0, notes)
    lines = _split(source)
    unit = _indent_unit(lines)
    out: list[str] = []
    cursor = fuzz = 0
    for hunk in parsed.hunks:
        placed = _place(lines, hunk, cursor, tolerant, notes)
        out.extend(lines[cursor : placed.start])
        out.extend(_replacement(lines, hunk, placed, unit, tolerant, notes))
        cursor = placed.start + sum(line.kind != "+" for line in placed.body)
        fuzz = max(fuzz, placed.fuzz)
    out.extend(lines[cursor:])
    return PatchResult(_join(out, _ends_with_newline(source)), len(parsed.hunks), fuzz, notes)


def _replacement(
    lines: Sequence[str], hunk: _Hunk, placed: _Placement, unit: int, tolerant: bool, notes: list[str]
) -> list[str]:
    shifts = iter(_indent_shifts(lines, hunk, placed, unit, tolerant, notes))
    out, i = [], placed.start
    for line in placed.body:
        if line.kind == " ":
            out.append(lines[i])  # the program's own text: a fuzzy match must not rewrite context
        elif line.kind == "+":
            out.append(_reindent(line.text, next(shifts)))
        i += line.kind != "+"
    return out


def _indent_shifts(
    lines: Sequence[str], hunk: _Hunk, placed: _Placement, unit: int, tolerant: bool, notes: list[str]
) -> list[int]:
    """Spaces to add to each added line: all 0 in strict mode, which refuses a hunk whose lines only
    match with indentation ignored, since the indentation of its added lines cannot be trusted."""
    old = [line for line in placed.body if line.kind != "+"]
    pairs = [(line, lines[placed.start + k]) for k, line in enumerate(old) if line.text.strip()]
    off = [(line, program) for line, program in pairs if _indent(line.text) != _indent(program)]
    added = [line for line in placed.body if line.kind == "+"]
    if not tolerant:
        if off and any(line.text.strip() for line in added):
            line, program = off[0]
            k = placed.start + old.index(line)
            raise PatchError(
                f"hunk {hunk.number} (patch line {hunk.line}): its lines match the program only when "
                f"indentation is ignored: patch line {line.number} has {_indent(line.text)} spaces after its "
                f"prefix, program line {k + 1} has {_indent(program)}, so the added lines' indentation "
                f"cannot be trusted. {_FIX_HINT} Indent added lines the same way."
            )
        return [0] * len(added)
    if off:
        notes.append(f"indentation: hunk {hunk.number} matched only with indentation ignored")
    shifts = _choose_shifts(pairs, placed.body, unit)
    moved = [shift for shift, line in zip(shifts, added) if shift and line.text.strip()]
    if moved:
        by = ", ".join(f"{shift:+d}" for shift in sorted(set(moved)))
        notes.append(f"reindent: hunk {hunk.number}, {len(moved)} added line(s) shifted by {by} space(s)")
    return shifts


def _choose_shifts(pairs: list[tuple[_Line, str]], body: list[_Line], unit: int) -> list[int]:
    """Per added line, a shift that puts it on the program's indentation grid (a multiple of ``unit``).

    The hunk's preferred shift is the one that aligns most added statements; ties go to the offset
    seen on the removed lines, then on the context lines, then to no shift. A statement it leaves off
    the grid takes the first other shift that fits (models misindent some lines, not all: a line at
    column 0 has no space for the prefix to replace); a bracketed continuation keeps its statement's.
    """
    candidates = []
    for kind in "- ":
        deltas = [_indent(program) - _indent(line.text) for line, program in pairs if line.kind == kind]
        if deltas:
            candidates.append(Counter(deltas).most_common(1)[0][0])
    order = list(dict.fromkeys([*candidates, 0, 1, -1]))
    added = list(_added_lines(body))

    def fits(indent: int, shift: int) -> bool:
        return indent + shift >= 0 and (indent + shift) % unit == 0

    statements = [_indent(line.text) for line, starts in added if starts]
    best = max(order, key=lambda shift: sum(fits(indent, shift) for indent in statements))
    order.remove(best)
    shifts, current = [], best
    for line, starts in added:
        if starts:
            current = next((s for s in [best, *order] if fits(_indent(line.text), s)), best)
        shifts.append(current)
    return shifts


def _added_lines(body: list[_Line]) -> Iterator[tuple[_Line, bool]]:
    """Each added line, and whether it starts a statement (rather than continuing a bracket)."""
    previous = ""
    for line in body:
        if line.kind == "+":
            yield line, bool(line.text.strip()) and not previous.rstrip().endswith(_CONTINUES)
        if line.kind != "-" and line.text.strip():
            previous = line.text


# ---------------------------------------------------------------------------------------------------
# Generating
# ---------------------------------------------------------------------------------------------------


def make_patch(old: str, new: str, *, path: str = "program.py", context: int = 3) -> str:
    """A V4A patch that turns ``old`` into ``new`` when applied strictly.

    Hunks come from ``line_diff.align`` with ``context`` lines around each change (difflib's, within a work
    budget; past it, the changed middle is one hunk). A hunk whose lines would first match elsewhere gets the
    nearest enclosing ``def``/``class`` line(s) as ``@@`` anchors, or, failing that, more leading context: the
    least of up to ``MAX_LEAD_TRIES`` lines, else all of it back to where the previous hunk ended, which always
    disambiguates. Each try searches only the lines between the previous hunk and this one, so the work is linear
    in the program's lines for each try.
    """
    if old == new:
        raise PatchError("empty change")
    if new and new.endswith("\n") != _ends_with_newline(old):
        raise PatchError("a V4A patch cannot change whether the program ends with a newline")
    a, b = _split(old), _split(new)
    out = [BEGIN, f"*** Update File: {path}"]
    cursor = 0
    for group in align(a, b, context, autojunk=False).groups:  # bounded work on candidate source
        first, stop = group[0][1], group[-1][2]
        body = list(_opcode_lines(group, a, b))
        anchors, lead = _disambiguate(a, [line[1:] for line in body if line[0] != "+"], first, stop, cursor)
        out += [f"@@ {anchor}" for anchor in anchors] or ["@@"]
        out += [" " + line for line in a[first - lead : first]] + body
        if stop == len(a):
            out.append(END_OF_FILE)
        cursor = stop
    out.append(END)
    return "\n".join(out) + "\n"


def _opcode_lines(group: list[tuple[str, int, int, int, int]], a: list[str], b: list[str]) -> Iterator[str]:
    for tag, i1, i2, j1, j2 in group:
        if tag == "equal":
            yield from (" " + line for line in a[i1:i2])
        if tag in ("delete", "replace"):
            yield from ("-" + line for line in a[i1:i2])
        if tag in ("insert", "replace"):
            yield from ("+" + line for line in b[j1:j2])


def _disambiguate(
    a: list[str], block: list[str], first: int, stop: int, cursor: int
) -> tuple[list[str], int]:
    """Anchors and extra leading context lines that make a strict reading place the hunk at ``first``."""
    eof = stop == len(a)

    def lands(anchors: list[str], lead: int) -> bool:
        start = cursor
        for anchor in anchors:
            k = _find_line(a, anchor, start)
            if k is None:
                return False
            start = k + 1
        wanted = a[first - lead : first] + block
        # an occurrence starting past first - lead cannot make it the first: the search stops there
        found = _find_block(a, wanted, start, eof, end=first - lead + len(wanted))
        return found is not None and found[0] == first - lead

    if lands([], 0):
        return [], 0
    chain = _enclosing(a, block, first, cursor)
    for anchors in [[line] for line in chain] + [chain[::-1]]:
        if anchors and lands(anchors, 0):
            return anchors, 0
    for lead in range(1, min(first - cursor, MAX_LEAD_TRIES + 1)):
        if lands([], lead):
            return [], lead
    # Leading context reaching back to where the previous hunk ended matches right there.
    return [], first - cursor


def _enclosing(a: list[str], block: list[str], first: int, cursor: int) -> list[str]:
    """Anchor candidates, nearest first: for an insertion without context the line just above it,
    then the def/class lines that enclose the hunk (each less indented than the one before)."""
    chain = [a[first - 1].strip()] if not block and first > cursor and a[first - 1].strip() else []
    level = min((_indent(line) for line in block if line.strip()), default=1 << 30)
    for k in range(first - 1, cursor - 1, -1):
        if _DEF_OR_CLASS.match(a[k]) and _indent(a[k]) < level:
            chain.append(a[k].strip())
            level = _indent(a[k])
    return chain
