"""Small connected bundles of a history's pieces, the material one question is planned from.

A piece is what a question can cite: an evidence unit of a text (a dialogue turn) where the text has units,
else the whole text. Two pieces are connected when they are adjacent (in the same text, or the last and first
of consecutive texts) or when they share a name or a rare word. A bundle grows from a seed piece along its
strongest connections, within a size budget, so its pieces can be combined into one question (a comparison,
a temporal order, an update) yet it stays small enough for a planner to read. Seeded: the same texts and seed
give the same bundles.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass

from mstar_ray import text as tx
from mstar_ray.tasks.model import RawText

MAX_PIECES = 4
MAX_CHARS = 1800
RARE_SHARE = 0.05  # a word in at most this share of the pieces is rare enough to connect two of them


@dataclass(frozen=True)
class Piece:
    id: str  # what a question's evidence names: the unit's id, or the text's
    text_id: str
    text: str
    date: str  # the date its text opens with, if any ("[7 May 2023] ...")


@dataclass(frozen=True)
class Bundle:
    pieces: tuple[Piece, ...]

    def get(self, piece_id: str) -> Piece | None:
        return next((p for p in self.pieces if p.id == piece_id), None)

    def render(self) -> str:
        """The bundle as the author reads it: each piece under its id, with its text's date."""
        return "\n".join(f"[{p.id}]" + (f" ({p.date})" if p.date else "") + f" {p.text}" for p in self.pieces)


def pieces(texts: list[RawText]) -> list[Piece]:
    found = []
    for raw in texts:
        header = tx.parse_turn(raw.text.splitlines()[0] if raw.text else "")
        date = header.date.text if header.date is not None else ""
        if raw.units:
            found += [Piece(u.id, raw.id, raw.text[u.start:u.end], date) for u in raw.units]
        else:
            found.append(Piece(raw.id, raw.id, raw.text, date))
    return [p for p in found if p.text.strip()]


def _links(items: list[Piece]) -> list[Counter[int]]:
    """Each piece's connection strength to the others: adjacency, then shared names and rare words."""
    terms = [set(tx.content_stems(p.text)) | {n.text.lower() for n in tx.find_names(p.text)} for p in items]
    frequency = Counter(t for ts in terms for t in ts)
    rare = max(2, math.ceil(RARE_SHARE * len(items)))
    by_term: dict[str, list[int]] = {}
    for i, ts in enumerate(terms):
        for term in ts:
            if frequency[term] <= rare:
                by_term.setdefault(term, []).append(i)
    links: list[Counter[int]] = [Counter() for _ in items]
    for i in range(len(items) - 1):
        links[i][i + 1] += 2
        links[i + 1][i] += 2
    for members in by_term.values():
        for i in members:
            for j in members:
                if i != j:
                    links[i][j] += 1
    return links


def bundles(texts: list[RawText], count: int, seed: int = 0) -> list[Bundle]:
    """``count`` bundles (fewer if the history is small), seeded; every piece seeds at most one bundle, and a
    bundle grown to the same pieces as an earlier one is not made again."""
    items = pieces(texts)
    if not items:
        return []
    links = _links(items)
    order = list(range(len(items)))
    random.Random(f"bundles:{seed}").shuffle(order)
    made: list[Bundle] = []
    for start in order:
        if len(made) == count:
            break
        chosen, size = [start], len(items[start].text)
        while len(chosen) < MAX_PIECES:
            near: Counter[int] = Counter()
            for member in chosen:
                near.update({j: w for j, w in links[member].items() if j not in chosen})
            best = min(near, key=lambda j: (-near[j], j), default=None)
            if best is None or size + len(items[best].text) > MAX_CHARS:
                break
            chosen.append(best)
            size += len(items[best].text)
        bundle = Bundle(tuple(items[i] for i in sorted(chosen)))
        if bundle not in made:
            made.append(bundle)
    return made
