"""``merge_relative``: take into the parent what a program of another line gained by (GEPA's merge, line by line
as ``git merge`` does).

Two children of one program often gain by different edits (keyword fusion in ``read()``, a table beside the
vectors in ``write()``); the program with both is two edits from their common ancestor, and a search that
reflects on one of them draws the other edit again only by chance. Here the relative's change from the common
ancestor is applied to the parent as a three-way merge: lines the relative replaced are replaced the same way where
the parent kept them; lines it inserted go where the parent still has the line after them (beside what the parent
inserted there: new definitions side by side); a replaced line the parent changed too is a conflict. Where the
lines conflict (keyword fusion and the table both rewrite ``read()``'s last line) and the relative is an offline
child one edit from the ancestor, that edit is made again on the parent. The child must pass what every offline
child passes (``_valid``) and read no attribute it never sets (``crossover._consistent``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from mstar_ray.line_diff import Opcode, align
from mstar_ray.reflect.offline.crossover import _consistent
from mstar_ray.reflect.offline.engine import Mutation, NoMutation, _valid, what_changed

if TYPE_CHECKING:
    from mstar_ray.reflect.request import Relative

# Kinds whose change is not the same change made again on another program: a crossover takes a random unit of a
# random donor, and a merge's change is two edits.
NOT_REPLAYED = frozenset({"crossover", "merge_relative"})


def _changes(a: list[str], b: list[str]) -> list[Opcode]:
    """The runs of lines that differ between ``a`` and ``b``, in order, aligned in bounded work (``line_diff``): a
    source shaped to make the alignment costly gets a coarser one, with more conflicts, never more host time."""
    return [op for group in align(a, b, 0, autojunk=False).groups for op in group if op[0] != "equal"]


def _kept_lines(base: list[str], mine: list[str]) -> dict[int, int]:
    """Base line -> the line of ``mine`` that is that line, unchanged: every line outside the changed runs."""
    kept: dict[int, int] = {}
    i = j = 0
    for _, i1, i2, j1, j2 in [*_changes(base, mine), ("equal", len(base), len(base), len(mine), len(mine))]:
        kept.update({i + k: j + k for k in range(i1 - i)})
        i, j = i2, j2
    return kept


def three_way(base: str, mine: str, theirs: str) -> str | None:
    """``mine`` with the changes ``theirs`` made to ``base``; None on a conflict (theirs replaced lines that mine
    changed too) or when theirs changed nothing. Lines theirs inserted go where mine still has the line after them
    (after what mine inserted there: new definitions side by side), else after the line before them."""
    b, m, t = (s.splitlines(keepends=True) for s in (base, mine, theirs))
    kept = _kept_lines(b, m)
    hunks = _changes(b, t)
    if not hunks:
        return None
    edits: list[tuple[int, int, list[str]]] = []
    for _, i1, i2, j1, j2 in hunks:
        if i1 < i2:
            places = [kept.get(k) for k in range(i1, i2)]
            if None in places or places != list(range(kept[i1], kept[i1] + i2 - i1)):
                return None
            start, end = kept[i1], kept[i2 - 1] + 1
        elif i1 in kept or i1 == len(b):
            start = end = kept[i1] if i1 < len(b) else len(m)
        elif i1 - 1 in kept:
            start = end = kept[i1 - 1] + 1
        else:
            return None
        edits.append((start, end, t[j1:j2]))
    merged = list(m)
    for start, end, lines in sorted(edits, key=lambda e: e[:2], reverse=True):
        merged[start:end] = lines
    return "".join(merged)


def merge_relative(source: str, relatives: Sequence[Relative], rng: random.Random, *, avoid: Collection[str] = (),
                   replay: Callable[[str], Callable[[random.Random], Mutation] | None] = lambda kind: None) -> Mutation:
    """The parent with the change of one of ``relatives`` (each a program of another line, with the common
    ancestor it gained over), the one that gained most first, ties in a random order: its lines merged
    (``three_way``), or where they conflict and it is an offline child of the ancestor itself (its change one
    edit), that edit made again on the parent (``replay`` gives the editor of a kind, or None)."""
    for relative in sorted(relatives, key=lambda r: (-r.gain, rng.random())):
        about = (f"#{relative.id[:8]} changed from our common ancestor #{relative.ancestor_id[:8]} "
                 f"(+{relative.gain:.3f} there: {what_changed(relative.commit_message)[:120]})")
        merged = three_way(relative.ancestor_source, source, relative.source)
        if merged is not None and _valid(source, merged, avoid) and _consistent(merged):
            return Mutation("merge_relative", f"merge in what {about}", merged)
        kind = relative.origin.removeprefix("mutation:")
        one_edit = relative.parent == relative.ancestor_id and relative.origin.startswith("mutation:")
        editor = replay(kind) if one_edit and kind not in NOT_REPLAYED else None
        try:
            made = editor(rng) if editor is not None else None
        except NoMutation:
            made = None
        if made is not None:
            return Mutation("merge_relative", f"make again here what {about}: {made.description}", made.source)
    raise NoMutation("no relative's change merges into this program, or can be made again on it")
