"""Answer scoring: SQuAD v1.1-style normalisation, token F1, exact match, and per-category summaries.

The normalisation follows SQuAD v1.1 (lowercase, drop punctuation, drop the articles a/an/the, collapse
whitespace). The official LoCoMo evaluation goes further (also drops commas and "and", Porter-stems tokens, and
splits multi-hop answers on commas); those extras are deliberately not applied here so that scores stay comparable
across tasks and need no NLP dependency.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """Lowercase, strip ASCII punctuation, drop the articles a/an/the, and collapse whitespace."""
    lowered = s.lower()
    # Punctuation goes before articles so that "the," or "(a)" still count as articles.
    no_punct = "".join(ch for ch in lowered if ch not in _PUNCTUATION)
    no_articles = _ARTICLES.sub(" ", no_punct)
    return " ".join(no_articles.split())


def token_f1(prediction: str, ground_truth: str) -> float:
    """Harmonic mean of token precision and recall over the multiset of normalised tokens.

    As in SQuAD v1.1, no shared token gives 0.0, and that includes the case where both sides normalise to nothing.
    """
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(ground_truth).split()
    overlap = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)
