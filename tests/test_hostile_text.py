"""No host work on candidate text without a bound: the text functions the offline agent runs on a program's
declarations and read() answers are linear on the shapes that made them quadratic (runs of "!", "$", "?",
abbreviations, thousands of dates), at the largest size a program may declare for one prompt; their results
on honest text are the ones they always gave (``scripts`` aside, the seeds' evaluations are unchanged)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mstar_ray import text as tx
from mstar_ray.families.qa import offline as answer
from mstar_ray.agent.offline.backend import OfflineBackend
from mstar_ray.families.qa import ANSWER
from mstar_ray.families.step import Shown
from mstar_ray.contract import DECLARED_PROMPT_MAX_CHARS
from tests.work_count import lines_run

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ["!", "$", "?", ".", "!.?", "a$", "$1", "Dr. A ", "A. ", "8 May ", "May 8, 2023 ", "1,", "a.", "'-", "(", "12:30 "]
backend = OfflineBackend()
FUNCTIONS: dict[str, Callable[[str], object]] = {
    "split_sentences": tx.split_sentences,
    "find_dates": tx.find_dates,
    "find_numbers": tx.find_numbers,
    "span tokens": answer._span_tokens,
    "generic span": lambda t: answer._generic_span(t, set(), set()),
    "offline answer": lambda t: backend.perform(ANSWER, Shown("Answer.", t, t[:3000]), "When did Caroline go to the museum?"),
}


def repeated(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


@pytest.mark.parametrize("function", list(FUNCTIONS))
def test_text_handling_is_linear_on_adversarial_runs_of_the_largest_declared_size(function):
    """Counted, not timed: the Python lines run on the largest text against one an eighth of its size (linear:
    8x, quadratic: 64x; a few hundred lines of set-up aside). ``scripts/bench_host_bounds.py`` times them, the
    regular expressions' own scans included."""
    run = FUNCTIONS[function]
    superlinear = []
    for unit in SHAPES:
        full = lines_run(lambda: run(repeated(unit, DECLARED_PROMPT_MAX_CHARS)))
        eighth = lines_run(lambda: run(repeated(unit, DECLARED_PROMPT_MAX_CHARS // 8)))
        if full > 12 * eighth + 2000:
            superlinear.append(f"{unit!r}: {full:,} lines, {eighth:,} for an eighth")
    assert not superlinear, superlinear


def test_split_sentences_keeps_its_boundaries_and_abbreviations():
    assert tx.split_sentences("Dr. Smith came. He left!! Then? \"Yes.\" She said") == [
        "Dr. Smith came.", "He left!!", "Then?", "\"Yes.\"", "She said"]
    assert tx.split_sentences("I met J. K. Rowling. Wow") == ["I met J. K. Rowling.", "Wow"]
    assert tx.split_sentences("!" * 50 + " A") == ["!" * 50, "A"]


def test_span_tokens_are_the_ones_the_single_pattern_gave():
    assert answer._span_tokens("It cost $20.50, a 10% tip - Alice's dog's!") == [
        "It", "cost", "$20.50", ",", "a", "10%", "tip", "Alice's", "dog's", "!"]
    assert answer._span_tokens("$$$ a$$ .x") == ["$", "$", "$", "a", "$", "$", ".", "x"]


def test_a_program_declaring_the_worst_shapes_is_evaluated_like_any_other():
    """Its ALWAYS_ON_KNOWLEDGE and read() answers are the runs above, on every question: the evaluation
    finishes (before, about a minute of host work per question)."""
    done = subprocess.run([sys.executable, "-m", "mstar_ray.cli", "eval", str(ROOT / "tests" / "hostile" /
                           "punctuation_runs.py"), "--task", "synthetic", "--limit", "6", "--embedder", "hashing"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "overall" in done.stdout
