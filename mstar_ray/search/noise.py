"""How much of a static score is noise: bootstrap intervals over the questions that make it.

A static score is a mean over a few dozen questions, so two programs a few hundredths apart may be
indistinguishable. ``bootstrap_interval`` gives the percentile interval of one program's mean;
``paired_interval`` that of the difference between two programs scored on the same questions, which is
far narrower than comparing two separate intervals because both programs meet the same easy and hard
questions in every resample.

Deterministic: the resamples depend only on (seed, number of questions), so every program of a run is
resampled with the same index draws (what makes the paired interval paired), and a resumed run, the
status command and the report all compute the same intervals.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95


def _scores(name: str, values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty list of per-question scores, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} contains NaN or infinite scores")
    return array


def _draws(n: int, seed: int, resamples: int) -> np.ndarray:
    """(resamples, n) question indices drawn with replacement, the same for every caller with this seed and n."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    rng = np.random.default_rng(np.random.SeedSequence([abs(int(seed)), n]))
    return rng.integers(0, n, size=(resamples, n))


def _percentiles(means: np.ndarray, level: float) -> tuple[float, float]:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def bootstrap_interval(scores: Sequence[float], *, seed: int, resamples: int = RESAMPLES,
                       level: float = LEVEL) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``scores`` (one per question)."""
    array = _scores("scores", scores)
    return _percentiles(array[_draws(array.size, seed, resamples)].mean(axis=1), level)


def paired_interval(a: Sequence[float], b: Sequence[float], *, seed: int, resamples: int = RESAMPLES,
                    level: float = LEVEL) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a) - mean(b), ``a[i]`` and ``b[i]`` scored on the same question."""
    first, second = _scores("a", a), _scores("b", b)
    if first.size != second.size:
        raise ValueError(f"paired scores need the same questions: {first.size} against {second.size}")
    return _percentiles((first - second)[_draws(first.size, seed, resamples)].mean(axis=1), level)
