"""Text from a candidate made safe to print on a terminal.

A program's messages, tracebacks, commit messages and violation reasons are the candidate's (or a
reflector's) words: an ESC sequence in one retitles the terminal, erases lines, writes the clipboard
(OSC 52) or prints a fake line; a carriage return overwrites what was printed; a bidirectional override
reorders it; a lone surrogate makes ``print`` raise. Everything the CLI, the live line, ``status`` and
the eval report print passes through ``printable``, which spells such characters out (``\\x1b``).
"""

from __future__ import annotations

# C0 and C1 controls and DEL; the bidirectional embeddings, overrides, isolates and marks; line and
# paragraph separators; every surrogate (only a lone one reaches a str).
_UNSAFE = [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
           *range(0x2066, 0x206A), 0x2028, 0x2029, *range(0xD800, 0xE000)]
_TABLE = {code: (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}") for code in _UNSAFE}
_TABLE_KEEPING_LINES = {**{code: text for code, text in _TABLE.items() if code != 0x0A}, 0x09: "\t"}


def printable(text: object, *, lines: bool = True) -> str:
    """``text`` with every control character escaped: with ``lines`` newlines and tabs stay as they are
    (a traceback keeps its shape), without them they are escaped too (one line of a live status)."""
    return str(text).translate(_TABLE_KEEPING_LINES if lines else _TABLE)
