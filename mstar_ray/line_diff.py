"""A unified diff of two candidate sources in bounded work. ``difflib`` aligns lines with a matcher whose cost grows
with the product of the two sides' lengths and more (a child whose lines are its parent's reordered made the
report run for minutes); a candidate's source is untrusted, so its shape must not buy host time. The lines both
sides share at the start and at the end are set aside in linear time; what is left is aligned line by line only
while the product of its lengths stays within ``MAX_ALIGNED_CELLS``, and is otherwise shown as one replacement,
with a line saying so. Seed-size programs (a few hundred lines) are always aligned.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

MAX_ALIGNED_CELLS = 1_000_000  # 1,000 changed lines against 1,000: a program five times the largest seed's length
TOO_LARGE = "(the change is too large to align line by line: the changed lines are shown whole)"


@dataclass(frozen=True)
class LineDiff:
    lines: list[str]  # unified diff lines, without line ends
    aligned_cells: int  # the product of the lengths handed to the matcher (0: none): the work it was allowed
    aligned: bool  # False: the changed middle was shown as one replacement


def unified_diff(before: str, after: str, before_name: str, after_name: str, *, context: int = 3) -> LineDiff:
    a, b = before.splitlines(), after.splitlines()
    if a == b:
        return LineDiff([], 0, True)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    middle_a, middle_b = a[head:len(a) - tail], b[head:len(b) - tail]
    # the matcher sees the changed middle with its context, so hunks read as difflib's own
    start, stop_a, stop_b = max(0, head - context), min(len(a), len(a) - tail + context), \
        min(len(b), len(b) - tail + context)
    cells = (stop_a - start) * (stop_b - start)
    if cells <= MAX_ALIGNED_CELLS:
        lines = list(difflib.unified_diff(a[start:stop_a], b[start:stop_b], before_name, after_name, lineterm="",
                                          n=context))
        return LineDiff(_shift(lines, start), cells, True)
    first, last = max(0, head - context), context
    hunk = [f"@@ -{first + 1},{len(a) - tail - first + min(last, tail)} +{first + 1},"
            f"{len(b) - tail - first + min(last, tail)} @@"]
    hunk += [" " + line for line in a[first:head]] + ["-" + line for line in middle_a]
    hunk += ["+" + line for line in middle_b] + [" " + line for line in a[len(a) - tail:len(a) - tail + last]]
    return LineDiff([f"--- {before_name}", f"+++ {after_name}", hunk[0], TOO_LARGE, *hunk[1:]], 0, False)


def _shift(lines: list[str], offset: int) -> list[str]:
    """Hunk headers of a diff of slices, renumbered to the whole files' lines."""
    if not offset:
        return lines
    shifted = []
    for line in lines:
        if line.startswith("@@ -"):
            old, new = line[3:line.index(" @@")].split(" ")
            shifted.append(f"@@ {_moved(old, offset)} {_moved(new, offset)} @@{line[line.index(' @@') + 3:]}")
        else:
            shifted.append(line)
    return shifted


def _moved(span: str, offset: int) -> str:
    sign, rest = span[0], span[1:]
    start, _, length = rest.partition(",")
    return f"{sign}{int(start) + offset}" + (f",{length}" if length else "")
