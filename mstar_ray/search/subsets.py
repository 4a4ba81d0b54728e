"""Choosing the validation split of the search loop (docs/design.md section 4, "Validation split").

Every candidate program is scored on the *static set*, so it must be small (each question costs task-LLM
calls for every candidate) yet cover the kinds of questions asked: one question per k-means cluster of
question embeddings. The *rotating set* feeds failure cases to the reflector; it is re-chosen each
iteration from the questions left over, so the reflector sees new failures rather than the same ones
again. The *training subset* written into memory holds the evidence of the static questions where the
task says which texts hold it, and is filled up to its budget with the texts that best cover the static
questions (greedy facility location), so a program is not scored on questions whose evidence was never
written.

Everything is deterministic from an integer seed (a resumed search must rebuild the same split) and
vectorised with numpy: the driver runs this once per search on up to ~10^4 questions and texts, and once
per iteration for the rotating set, so it must stay cheap at that size. Inputs are float arrays
with one embedding per row; embeddings are expected to be L2-normalised (k-means then groups by angle),
and facility location normalises its inputs itself because its objective is defined on cosines.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Iterator

import numpy as np

# Upper bound on the elements of any temporary distance/similarity block (32 MiB of float64), so that
# 10,000 x 10,000 inputs are processed in slices instead of one 800 MB matrix.
_BLOCK_ELEMENTS = 4_000_000

# Facility location keeps the whole target x candidate similarity matrix when it has at most this many
# elements (128 MiB of float64; 60 static questions x 10,000 texts is 600,000) and recomputes slices of
# it otherwise.
_CACHE_ELEMENTS = 16_000_000

# Incrementally updated gains drift from freshly computed ones by rounding; candidates within this much
# (relative to the number of targets, the largest possible gain) of the best estimate are re-scored
# exactly before choosing, so the picks are those of textbook greedy. Drift is orders of magnitude smaller.
_GAIN_TOLERANCE = 1e-9


# --------------------------------------------------------------------------------------------- validation


def _as_matrix(name: str, x: np.ndarray) -> np.ndarray:
    """The input as a finite float64 matrix with at least one row and one column, or a ValueError naming
    the argument; float64 so results do not depend on the caller's dtype."""
    try:
        matrix = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be a numeric array: {error}") from None
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be 2-D (one embedding per row), got {matrix.ndim}-D shape {matrix.shape}")
    if matrix.shape[0] < 1 or matrix.shape[1] < 1:
        raise ValueError(f"{name} must have at least one row and one column, got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return matrix


def _same_width(first: str, a: np.ndarray, second: str, b: np.ndarray) -> None:
    """Embeddings of different models cannot be compared; fail loudly instead of broadcasting."""
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"{first} have dimension {a.shape[1]} but {second} have dimension {b.shape[1]}")


def _positive_int(name: str, value: int) -> int:
    """A count that must be at least 1 (cluster count, budget, set size)."""
    number = operator.index(value)
    if number < 1:
        raise ValueError(f"{name} must be at least 1, got {number}")
    return number


def _seed(name: str, value: int) -> int:
    """A non-negative integer, the only kind numpy's seed sequences accept."""
    number = operator.index(value)
    if number < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {number}")
    return number


def _rows_per_block(n_columns: int) -> int:
    return max(1, _BLOCK_ELEMENTS // max(1, n_columns))


# ----------------------------------------------------------------------------------------------- k-means


def _nearest_centroids(
    x: np.ndarray, x_sq: np.ndarray, centroids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Label of each point's nearest centroid (lowest index on ties) and the squared distance to it.

    Uses ||a||^2 + ||b||^2 - 2ab so the work is one matrix product per block of rows; the block size keeps
    the n x k distance matrix bounded whatever n and k are.
    """
    n = x.shape[0]
    c_sq = np.einsum("ij,ij->i", centroids, centroids)
    labels = np.empty(n, dtype=np.intp)
    distances = np.empty(n, dtype=np.float64)
    step = _rows_per_block(centroids.shape[0])
    for start in range(0, n, step):
        stop = min(n, start + step)
        block = x_sq[start:stop, None] + c_sq[None, :] - 2.0 * (x[start:stop] @ centroids.T)
        block_labels = block.argmin(axis=1)
        labels[start:stop] = block_labels
        distances[start:stop] = block[np.arange(stop - start), block_labels]
    np.maximum(distances, 0.0, out=distances)  # the expansion can dip slightly below zero
    return labels, distances


def _kmeans_plus_plus(x: np.ndarray, x_sq: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Initial centroid indices by greedy k-means++.

    Each new centre is the best (lowest total squared distance) of a few candidates drawn with probability
    proportional to squared distance from the centres so far; the extra draws make a bad start, two centres
    in one cluster, much rarer than plain k-means++ at a small cost.
    """
    n = x.shape[0]
    trials = 2 + int(math.log(k))
    chosen = [int(rng.integers(n))]
    closest = np.maximum(x_sq + x_sq[chosen[0]] - 2.0 * (x @ x[chosen[0]]), 0.0)
    closest[chosen[0]] = 0.0
    for _ in range(1, k):
        total = closest.sum()
        if total > 0.0:
            candidates = rng.choice(n, size=trials, p=closest / total)
        else:  # every point coincides with a centre already: any choice is as good
            candidates = rng.integers(n, size=trials)
        distances = np.maximum(x_sq[:, None] + x_sq[candidates][None, :] - 2.0 * (x @ x[candidates].T), 0.0)
        distances[candidates, np.arange(trials)] = 0.0
        candidate_closest = np.minimum(closest[:, None], distances)
        best = int(candidate_closest.sum(axis=0).argmin())
        chosen.append(int(candidates[best]))
        closest = candidate_closest[:, best]
    return np.asarray(chosen, dtype=np.intp)


def _cluster_sums(x: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """Per-cluster sums of member rows as one-hot matrix products over row blocks: far faster than
    scatter-adds, and at 2nkd operations no dearer than the assignment step that precedes it."""
    n = x.shape[0]
    sums = np.zeros((k, x.shape[1]), dtype=np.float64)
    step = _rows_per_block(k)
    for start in range(0, n, step):
        stop = min(n, start + step)
        one_hot = np.zeros((k, stop - start), dtype=np.float64)
        one_hot[labels[start:stop], np.arange(stop - start)] = 1.0
        sums += one_hot @ x[start:stop]
    return sums


def _cluster_means(x: np.ndarray, labels: np.ndarray, distances: np.ndarray, k: int) -> np.ndarray:
    """New centroids as member means; an empty cluster is re-seeded on the points farthest from their
    centroids (lowest index on ties), which are the worst-served points and so the best place for it."""
    counts = np.bincount(labels, minlength=k)
    centroids = _cluster_sums(x, labels, k) / np.maximum(counts, 1)[:, None]
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        farthest = np.argsort(-distances, kind="stable")[: empty.size]
        centroids[empty] = x[farthest]
    return centroids


def kmeans(x: np.ndarray, k: int, *, seed: int, iters: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd's k-means with greedy k-means++ initialisation, deterministic for a given seed.

    Returns (centroids of shape (k, d), label per row of x). Stops as soon as the labels stop changing, or
    after `iters` update rounds; the labels returned are always those of the centroids returned.
    """
    x = _as_matrix("x", x)
    k = _positive_int("k", k)
    if k > x.shape[0]:
        raise ValueError(f"k ({k}) exceeds the number of points ({x.shape[0]})")
    iters = operator.index(iters)
    if iters < 0:
        raise ValueError(f"iters must be non-negative, got {iters}")
    rng = np.random.default_rng(_seed("seed", seed))
    x_sq = np.einsum("ij,ij->i", x, x)
    centroids = x[_kmeans_plus_plus(x, x_sq, k, rng)]
    labels, distances = _nearest_centroids(x, x_sq, centroids)
    for _ in range(iters):
        centroids = _cluster_means(x, labels, distances, k)
        new_labels, distances = _nearest_centroids(x, x_sq, centroids)
        converged = np.array_equal(new_labels, labels)
        labels = new_labels
        if converged:
            break
    return centroids, labels


# ---------------------------------------------------------------------------------- static / rotating sets


def _cluster_representatives(x: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Per cluster, the member closest to its centroid (lowest index on ties).

    With duplicate points k-means can end with fewer than k non-empty clusters; the set is then topped up
    with the points farthest from their centroids so it always has k distinct members.
    """
    n = x.shape[0]
    centroids, labels = kmeans(x, k, seed=seed)
    offsets = x - centroids[labels]
    distances = np.einsum("ij,ij->i", offsets, offsets)
    order = np.lexsort((np.arange(n), distances, labels))
    _, first_of_cluster = np.unique(labels[order], return_index=True)
    chosen = order[first_of_cluster]
    if chosen.size < k:
        taken = np.zeros(n, dtype=bool)
        taken[chosen] = True
        spare = np.flatnonzero(~taken)
        spare = spare[np.argsort(-distances[spare], kind="stable")]
        chosen = np.concatenate((chosen, spare[: k - chosen.size]))
    return np.sort(chosen)


def representative_set(x: np.ndarray, k: int, *, seed: int) -> list[int]:
    """The static set: one question per k-means cluster, the one closest to its centroid.

    Returns sorted row indices of x. k is clipped to the number of rows; if k >= n every row is returned,
    since a smaller set cannot represent n questions better than all of them.
    """
    x = _as_matrix("x", x)
    k = _positive_int("k", k)
    seed = _seed("seed", seed)
    if k >= x.shape[0]:
        return list(range(x.shape[0]))
    chosen: list[int] = _cluster_representatives(x, k, seed).tolist()
    return chosen


def _remaining(n: int, exclude: Iterable[int]) -> np.ndarray:
    """Sorted indices in range(n) not in exclude; an out-of-range exclusion is a caller bug, not a no-op."""
    keep = np.ones(n, dtype=bool)
    for raw in exclude:
        index = operator.index(raw)
        if not 0 <= index < n:
            raise ValueError(f"exclude contains {index}, outside 0..{n - 1}")
        keep[index] = False
    return np.flatnonzero(keep)


def rotating_set(
    x: np.ndarray, k: int, *, exclude: set[int] | list[int], iteration: int, seed: int
) -> list[int]:
    """The rotating set of one iteration: representatives of the questions not in `exclude`.

    The clustering seed is derived from (seed, iteration), so each iteration partitions the remaining
    questions differently and the reflector sees other failures, while a resumed search gets back exactly
    the set it had. Returns sorted indices into x (not into the remaining subset); empty when nothing
    remains.
    """
    x = _as_matrix("x", x)
    k = _positive_int("k", k)
    seed = _seed("seed", seed)
    iteration = _seed("iteration", iteration)
    remaining = _remaining(x.shape[0], exclude)
    if remaining.size == 0:
        return []
    derived = int(np.random.SeedSequence([seed, iteration]).generate_state(1)[0])
    local = representative_set(x[remaining], k, seed=derived)
    chosen: list[int] = remaining[local].tolist()
    return chosen


# ------------------------------------------------------------------------------------ facility location


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length so dot products are cosines; an all-zero row stays zero (cosine 0)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    unit: np.ndarray = x / np.where(norms > 0.0, norms, 1.0)
    return unit


def _similarities(targets: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Cosines clipped below at 0, one row per target; the clip keeps the objective monotone submodular,
    which is what makes the greedy guarantee hold."""
    cosines: np.ndarray = np.maximum(targets @ candidates.T, 0.0)
    return cosines


class _Similarity:
    """Clipped target x candidate similarities, held whole when small and recomputed in slices otherwise,
    so memory stays bounded (by _CACHE_ELEMENTS and _BLOCK_ELEMENTS) whatever the input size."""

    def __init__(self, targets: np.ndarray, candidates: np.ndarray):
        self.targets = targets
        self.candidates = candidates
        small = targets.shape[0] * candidates.shape[0] <= _CACHE_ELEMENTS
        self.matrix = _similarities(targets, candidates) if small else None

    def row_blocks(self, rows: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(target indices, their similarity rows to every candidate), a bounded block at a time."""
        step = _rows_per_block(self.candidates.shape[0])
        for start in range(0, rows.size, step):
            block = rows[start : start + step]
            if self.matrix is not None:
                yield block, self.matrix[block]
            else:
                yield block, _similarities(self.targets[block], self.candidates)

    def column_blocks(self, columns: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(candidate indices, their similarity columns to every target), a bounded block at a time."""
        step = _rows_per_block(self.targets.shape[0])
        for start in range(0, columns.size, step):
            block = columns[start : start + step]
            if self.matrix is not None:
                yield block, self.matrix[:, block]
            else:
                yield block, _similarities(self.targets, self.candidates[block])


def _initial_scores(similarity: _Similarity) -> tuple[np.ndarray, np.ndarray]:
    """Every candidate's gain on empty cover (its total similarity) and every target's highest
    similarity to any candidate, the cover beyond which no pick can raise it."""
    n_candidates = similarity.candidates.shape[0]
    gains = np.empty(n_candidates, dtype=np.float64)
    ceiling = np.zeros(similarity.targets.shape[0], dtype=np.float64)
    for block, sims in similarity.column_blocks(np.arange(n_candidates)):
        gains[block] = sims.sum(axis=0)
        np.maximum(ceiling, sims.max(axis=1), out=ceiling)
    return gains, ceiling


def _exact_gains(similarity: _Similarity, columns: np.ndarray, best: np.ndarray) -> np.ndarray:
    """Marginal gain of each given candidate from scratch: how much it would raise every target's cover."""
    gains = np.empty(columns.size, dtype=np.float64)
    done = 0
    for block, sims in similarity.column_blocks(columns):
        gains[done : done + block.size] = np.maximum(sims - best[:, None], 0.0).sum(axis=0)
        done += block.size
    return gains


def _exact_column(similarity: _Similarity, column: int) -> np.ndarray:
    """Similarities of one candidate to every target."""
    return next(similarity.column_blocks(np.array([column])))[1][:, 0]


def _gain_losses(similarity: _Similarity, changed: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """How much every candidate's gain drops when the cover of the `changed` targets rises from old to new.

    Per target the drop is max(s - old, 0) - max(s - new, 0) = clip(s, old, new) - old, so only the rows
    of targets whose cover changed are touched; after the first few picks those are a small fraction.
    """
    losses = np.zeros(similarity.candidates.shape[0], dtype=np.float64)
    for rows, sims in similarity.row_blocks(changed):
        low, high = old[rows][:, None], new[rows][:, None]
        np.clip(sims, low, high, out=sims)
        sims -= low
        losses += sims.sum(axis=0)
    return losses


def _greedy_pick(similarity: _Similarity, gains: np.ndarray, best: np.ndarray, tolerance: float) -> int:
    """The textbook greedy choice: highest exact gain, lowest index on ties. Candidates whose estimate
    is within `tolerance` of the top are re-scored exactly (and their estimates refreshed) first."""
    close = np.flatnonzero(gains >= gains.max() - tolerance)
    if close.size == 1:
        return int(close[0])
    exact = _exact_gains(similarity, close, best)
    gains[close] = exact
    return int(close[exact.argmax()])


def facility_location(targets: np.ndarray, candidates: np.ndarray, budget: int, *,
                      given: Iterable[int] = ()) -> list[int]:
    """Greedy maximisation of F(S) = sum over targets of max over S of clipped cosine(target, candidate).

    Plain greedy with incremental gains: every candidate's marginal gain is kept in one vector and, after
    each pick, lowered by the loss computed from the rows of the targets whose cover the pick improved;
    no candidate is ever re-scored against all targets except to settle near-ties. Returns candidate
    indices in the order chosen, min(budget, len(candidates)) of them, ties going to the lower index.
    The ``given`` candidates (e.g. texts that must be written because they hold the evidence) come first,
    in their order, and count against the budget, which is raised to hold them all; greedy then covers
    what they leave uncovered. F saturates once every target has its most similar candidate (at most
    len(targets) picks). The rest of the budget then goes to a new greedy round over the unchosen
    candidates, which gives each target its next most similar text (what a multi-hop question needs),
    rather than to arbitrary texts; only candidates similar to no target at all are taken in index order.
    """
    targets = _unit_rows(_as_matrix("targets", targets))
    candidates = _unit_rows(_as_matrix("candidates", candidates))
    _same_width("targets", targets, "candidates", candidates)
    forced = list(dict.fromkeys(operator.index(i) for i in given))
    for index in forced:
        if not 0 <= index < candidates.shape[0]:
            raise ValueError(f"given contains {index}, outside 0..{candidates.shape[0] - 1}")
    picks = min(max(_positive_int("budget", budget), len(forced)), candidates.shape[0])

    similarity = _Similarity(targets, candidates)
    best = np.zeros(targets.shape[0])
    gains, ceiling = _initial_scores(similarity)
    tolerance = _GAIN_TOLERANCE * targets.shape[0]
    chosen: list[int] = []
    while len(chosen) < picks:
        if len(chosen) < len(forced):
            pick = forced[len(chosen)]
        elif (best >= ceiling).all():  # every target has its most similar candidate: all gains are 0
            rest = np.flatnonzero(np.isfinite(gains))
            if not chosen:  # nothing here is similar to any target
                chosen += rest[: picks - len(chosen)].tolist()
            else:
                chosen += rest[facility_location(targets, candidates[rest], picks - len(chosen))].tolist()
            break
        else:
            pick = _greedy_pick(similarity, gains, best, tolerance)
        chosen.append(pick)
        cover = _exact_column(similarity, pick)
        changed = np.flatnonzero(cover > best)
        new = best.copy()
        new[changed] = cover[changed]
        gains -= _gain_losses(similarity, changed, best, new)
        gains[pick] = -np.inf
        best = new
    return chosen


def coverage(targets: np.ndarray, candidates: np.ndarray, chosen: Iterable[int]) -> float:
    """F(S) for the chosen candidate indices (0 for none): the facility-location objective, so callers
    can log how well a training subset covers the static questions."""
    targets = _unit_rows(_as_matrix("targets", targets))
    candidates = _unit_rows(_as_matrix("candidates", candidates))
    _same_width("targets", targets, "candidates", candidates)
    indices = [operator.index(i) for i in chosen]
    if not indices:
        return 0.0
    for index in indices:
        if not 0 <= index < candidates.shape[0]:
            raise ValueError(f"chosen contains {index}, outside 0..{candidates.shape[0] - 1}")
    return float(_similarities(targets, candidates[indices]).max(axis=1).sum())


# ----------------------------------------------------------------------------------------- the split


def training_budget(static_size: int, ratio: float) -> int:
    """Number of training texts for a static set: ratio x static_size rounded half up, at least 1
    (paper: ratio 2). Half up rather than Python's banker's rounding so 2.5 texts means 3, not 2."""
    static_size = _positive_int("static_size", static_size)
    ratio = float(ratio)
    if not math.isfinite(ratio) or ratio <= 0.0:
        raise ValueError(f"ratio must be a positive finite number, got {ratio}")
    return max(1, math.floor(ratio * static_size + 0.5))


def choose_validation_split(
    question_vecs: np.ndarray, text_vecs: np.ndarray, *, static_size: int, ratio: float, seed: int,
    evidence: list[list[int]] | None = None,
) -> tuple[list[int], list[int]]:
    """(static question indices, training text indices) for one search.

    The static set is the representative set of the questions. ``evidence[i]``, when given, lists the
    texts holding question i's evidence: those of the static questions are always written (a program
    cannot be scored on a question whose evidence it never saw), first, in text order; facility location
    with the static questions as targets fills the rest of the budget, ratio x |static set| (after
    clipping to the number of questions) but never fewer than the evidence texts, in greedy order so a
    prefix of its picks is itself a good smaller subset.
    """
    question_vecs = _as_matrix("question_vecs", question_vecs)
    text_vecs = _as_matrix("text_vecs", text_vecs)
    _same_width("question_vecs", question_vecs, "text_vecs", text_vecs)
    if evidence is not None and len(evidence) != question_vecs.shape[0]:
        raise ValueError(f"evidence has {len(evidence)} entries for {question_vecs.shape[0]} questions")
    static = representative_set(question_vecs, static_size, seed=seed)
    required = sorted({text for i in static for text in evidence[i]}) if evidence is not None else []
    train = facility_location(question_vecs[static], text_vecs, training_budget(len(static), ratio), given=required)
    return static, train
