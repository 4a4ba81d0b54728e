"""Two candidate sources aligned line by line in bounded work, for a unified diff (the report) or a patch (the
offline reflector's ``v4a.make_patch``). ``difflib``'s matcher does work that grows with more than the product of
the two sides' lengths (a child whose lines are its parent's, each followed by a new one, made the report run for
minutes; a run of one repeated line makes each of its longest-match searches quadratic, and it makes up to one
per line); a candidate's source is untrusted, so its shape must not buy host time.

The lines both sides share at the start and at the end are set aside in linear time. What is left is aligned
only while the product of its lengths stays within ``MAX_ALIGNED_CELLS``, and the matcher is charged, before each
longest-match search, an upper bound of that search's steps: past ``MAX_MATCH_STEPS`` in all it stops, and the
changed middle is shown as one replacement (with a line saying so in a diff). Seed-size edits are always aligned.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

MAX_ALIGNED_CELLS = 1_000_000  # 1,000 changed lines against 1,000: a program five times the largest seed's length
# the matcher's steps, bounded above: about 0.2 s (scripts/bench_host_bounds.py); two whole seeds take under 10,000
MAX_MATCH_STEPS = 1_000_000
TOO_LARGE = "(the change is too large to align line by line: the changed lines are shown whole)"

Opcode = tuple[str, int, int, int, int]


@dataclass(frozen=True)
class Alignment:
    groups: list[list[Opcode]]  # difflib's grouped opcodes, on the whole sequences' line numbers
    aligned_cells: int  # the product of the lengths handed to the matcher (0: none)
    steps: int  # the matcher's steps charged, at most MAX_MATCH_STEPS (an upper bound of what it did)
    aligned: bool  # False: the changed middle is one replacement


@dataclass(frozen=True)
class LineDiff:
    lines: list[str]  # unified diff lines, without line ends
    aligned_cells: int
    steps: int
    aligned: bool


class _OverBudget(Exception):
    pass


class _BudgetedMatcher(difflib.SequenceMatcher[str]):
    """difflib's matcher, charged before each longest-match search: that search visits, for each line of its range
    of ``a``, the line's matches in ``b`` (at most all of them), then extends the match it found within the ranges."""

    # set by SequenceMatcher.set_seqs, left out of the stdlib stubs
    a: Sequence[str]
    b: Sequence[str]
    b2j: dict[str, list[int]]

    def __init__(self, a: Sequence[str], b: Sequence[str], budget: int, autojunk: bool):
        self.steps, self._budget = 0, budget
        super().__init__(None, a, b, autojunk=autojunk)
        self._matches_before = list(itertools.accumulate((len(self.b2j.get(line, ())) for line in a), initial=0))

    def find_longest_match(self, alo: int = 0, ahi: int | None = None, blo: int = 0, bhi: int | None = None) -> difflib.Match:
        ahi = len(self.a) if ahi is None else ahi
        bhi = len(self.b) if bhi is None else bhi
        # the search's loop runs once per line of a and once per match of it; its extensions grow the match found,
        # which fits within the shorter range
        charge = self._matches_before[ahi] - self._matches_before[alo] + (ahi - alo) + min(ahi - alo, bhi - blo) + 1
        if self.steps + charge > self._budget:
            raise _OverBudget
        self.steps += charge
        return super().find_longest_match(alo, ahi, blo, bhi)


def align(a: Sequence[str], b: Sequence[str], context: int = 3, *, autojunk: bool = True) -> Alignment:
    """The changes from ``a`` to ``b`` as groups of opcodes with ``context`` equal lines around each, as
    ``difflib.SequenceMatcher(None, a, b, autojunk).get_grouped_opcodes(context)`` gives them when the work fits."""
    if a == b:
        return Alignment([], 0, 0, True)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    # the matcher sees the changed middle with its context, so the groups are difflib's own
    start, stop_a, stop_b = max(0, head - context), min(len(a), len(a) - tail + context), \
        min(len(b), len(b) - tail + context)
    cells = (stop_a - start) * (stop_b - start)
    if cells <= MAX_ALIGNED_CELLS:
        matcher = _BudgetedMatcher(a[start:stop_a], b[start:stop_b], MAX_MATCH_STEPS, autojunk)
        try:
            groups = list(matcher.get_grouped_opcodes(context))
            return Alignment([[(tag, i1 + start, i2 + start, j1 + start, j2 + start) for tag, i1, i2, j1, j2 in group]
                              for group in groups], cells, matcher.steps, True)
        except _OverBudget:
            pass
        steps = matcher.steps
    else:
        cells, steps = 0, 0
    end_a, end_b = len(a) - tail, len(b) - tail
    last = min(context, tail)
    tag = "replace" if head < end_a and head < end_b else "delete" if head < end_a else "insert"
    group = [("equal", start, head, start, head), (tag, head, end_a, head, end_b),
             ("equal", end_a, end_a + last, end_b, end_b + last)]
    return Alignment([[op for op in group if op[0] != "equal" or op[1] < op[2]]], cells, steps, False)


def unified_diff(before: str, after: str, before_name: str, after_name: str, *, context: int = 3) -> LineDiff:
    a, b = before.splitlines(), after.splitlines()
    found = align(a, b, context)
    lines = [f"--- {before_name}", f"+++ {after_name}"] if found.groups else []
    for group in found.groups:
        first, last = group[0], group[-1]
        lines.append(f"@@ -{_span(first[1], last[2])} +{_span(first[3], last[4])} @@")
        if not found.aligned:
            lines.append(TOO_LARGE)
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [" " + line for line in a[i1:i2]]
                continue
            lines += ["-" + line for line in a[i1:i2]]
            lines += ["+" + line for line in b[j1:j2]]
    return LineDiff(lines, found.aligned_cells, found.steps, found.aligned)


def _span(start: int, stop: int) -> str:
    """A hunk's range as a unified diff writes it (1-based; an empty range names the line before it)."""
    length = stop - start
    if length == 1:
        return f"{start + 1}"
    return f"{start + 1 if length else start},{length}"
