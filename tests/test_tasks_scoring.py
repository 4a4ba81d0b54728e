"""Answer scoring: values below are worked out by hand from the SQuAD v1.1 definitions."""

from __future__ import annotations

import pytest

from mstar_ray.families.qa.scoring import normalize_answer, token_f1


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("The Cat, sat!  on a Mat.", "cat sat on mat"),
        ("  An apple\tand\nthe pear ", "apple and pear"),
        ("Anthem of theory", "anthem of theory"),  # articles only as whole words
        ("7 May, 2023", "7 may 2023"),
        ("don't (A) stop", "dont stop"),  # punctuation goes first, so "(a)" becomes an article
        ("the a an", ""),
        ("", ""),
    ],
)
def test_normalize_answer(raw: str, normalised: str) -> None:
    assert normalize_answer(raw) == normalised


def test_token_f1_partial_overlap() -> None:
    # prediction {cat, sat} vs gold {cat, sat, down}: P = 2/2, R = 2/3, F1 = 2PR/(P+R) = 0.8
    assert token_f1("The cat sat", "cat sat down") == pytest.approx(0.8)


def test_token_f1_counts_repeated_tokens_once_per_match() -> None:
    # overlap is min(3, 1) = 1: P = 1/3, R = 1, F1 = (2/3)/(4/3) = 0.5
    assert token_f1("cat cat cat", "cat") == pytest.approx(0.5)
    # overlap 2 of 3 predicted, 2 of 2 gold: P = 2/3, R = 1, F1 = 0.8
    assert token_f1("dog dog cat", "dog dog") == pytest.approx(0.8)


def test_token_f1_is_symmetric_here_and_bounded() -> None:
    assert token_f1("cat sat down", "The cat sat") == pytest.approx(0.8)
    assert token_f1("Paris", "paris!") == 1.0
    assert token_f1("7 May 2023", "7 May, 2023") == 1.0


def test_token_f1_zero_cases_follow_squad_v1() -> None:
    assert token_f1("blue", "red") == 0.0
    assert token_f1("", "red") == 0.0
    # Both sides normalise to nothing: no common token, so 0.0 (SQuAD v1.1, not v2.0).
    assert token_f1("the", "a") == 0.0
    assert token_f1("", "") == 0.0
