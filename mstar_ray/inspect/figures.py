"""How figures and words are written wherever a run is shown (the end-of-run summary, ``status``, the report
and the live page): one rule each, so a score reads the same in every place."""

from __future__ import annotations

from collections.abc import Sequence


def score_text(value: float | None, interval: Sequence[float] | None = None) -> str:
    """A score to three decimals with its 95% interval when known: ``0.464 [0.279, 0.635]``; ``-`` for none."""
    if value is None:
        return "-"
    if interval is None or len(interval) != 2 or None in interval:
        return f"{value:.3f}"
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 child``, ``2 children``: the count with the word in the form it takes."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def shortened(text: str, limit: int) -> str:
    """``text`` on one line, cut at the last word boundary before ``limit`` characters with an ellipsis; whole if
    it fits (the whole text goes where a person can still read it: a title, a hover)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit].rsplit(" ", 1)[0] if " " in flat[:limit] else flat[:limit]
    return cut.rstrip(",;:.") + "…"


def cache_text(hits: int, requests: int) -> str:
    """The run cache's share, counted as the live line counts it: every model and embedding request of the
    evaluations (the candidates log's ``cache_hits`` of ``requests``)."""
    if not requests:
        return "no model or embedding request yet"
    return f"{hits} of {plural(requests, 'model and embedding request')} answered from the run's cache ({hits / requests:.0%})"
