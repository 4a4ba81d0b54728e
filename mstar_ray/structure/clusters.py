"""Clusters and a 2-D map of programs from their distance matrix alone.

Tree edit distances have no coordinates, so the methods here take a precomputed matrix: k-medoids
(every cluster centre is a real program, which a report can show), the silhouette to pick k, and
classical MDS to draw the population in the plane. n is a population (at most a few hundred), so exact
PAM with vectorised swap evaluation is cheap and preferred over sampling approximations.
"""

from __future__ import annotations

import numpy as np

# Kaufman and Rousseeuw's reading of the average silhouette: at or below 0.25 "no substantial structure
# has been found", so splitting the population would only draw arbitrary lines through it.
MIN_SILHOUETTE = 0.25
_MAX_SWAPS = 1000
# Swaps that gain less than this are rounding, not improvement; without it PAM can cycle on ties.
_TOLERANCE = 1e-12


def k_medoids(D: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """PAM (greedy BUILD, then best-improvement SWAP until no swap lowers the total distance).

    Returns the medoids (indices into ``D``) and each point's cluster (an index into the medoids; a
    medoid is in its own cluster). PAM itself is deterministic; ``seed`` only decides ties, which are
    common here since identical programs are at distance 0, by fixing the order candidates are tried.
    """
    D = _checked(D)
    n = len(D)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    k = min(k, n)
    order = np.random.default_rng(seed).permutation(n)
    P = D[np.ix_(order, order)]  # work in the permuted order, so argmin's first-wins picks by seed
    medoids = _build(P, k)
    medoids = _swap(P, medoids)
    labels = np.argmin(P[:, medoids], axis=1)
    labels[medoids] = np.arange(len(medoids))
    # back to the caller's indices; medoids listed in increasing index so labels do not depend on order
    original = order[medoids]
    rank = np.argsort(original)
    relabel = np.empty(len(rank), dtype=int)
    relabel[rank] = np.arange(len(rank))
    result = np.empty(n, dtype=int)
    result[order] = relabel[labels]
    return original[rank], result


def silhouette(D: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette over all points; a point alone in its cluster scores 0 (Rousseeuw 1987)."""
    D = _checked(D)
    clusters = np.unique(labels)
    if len(clusters) < 2:
        raise ValueError("the silhouette needs at least two clusters")
    member = labels[None, :] == clusters[:, None]  # clusters x points
    counts = member.sum(axis=1)
    sums = D @ member.T  # points x clusters: total distance to each cluster
    own = np.searchsorted(clusters, labels)
    own_counts = counts[own]
    a = np.where(own_counts > 1, sums[np.arange(len(D)), own] / np.maximum(own_counts - 1, 1), 0.0)
    means = sums / counts[None, :]
    means[np.arange(len(D)), own] = np.inf
    b = means.min(axis=1)
    spread = np.maximum(a, b)
    s = np.where((own_counts > 1) & (spread > 0), (b - a) / np.where(spread > 0, spread, 1.0), 0.0)
    return float(s.mean())


def choose_k(D: np.ndarray, k_max: int, seed: int = 0) -> int:
    """The k in 2..k_max whose k-medoids clustering has the best mean silhouette, or 1 when there is
    nothing to split: fewer than three programs, all identical, or no k reaching ``MIN_SILHOUETTE``."""
    D = _checked(D)
    n = len(D)
    # k = n is all singletons (silhouette 0 by definition); it never wins and costs the most
    candidates = range(2, min(k_max, n - 1) + 1)
    if n < 3 or not np.any(D > 0) or not candidates:
        return 1
    scores = {k: silhouette(D, k_medoids(D, k, seed)[1]) for k in candidates}
    best = max(scores, key=lambda k: (scores[k], -k))  # ties go to the simpler clustering
    return best if scores[best] > MIN_SILHOUETTE else 1


def classical_mds(D: np.ndarray, dims: int = 2) -> np.ndarray:
    """Torgerson's classical scaling: points whose Euclidean distances best match ``D``.

    Double-centre the squared distances, keep the top ``dims`` eigenvectors scaled by the square roots
    of their eigenvalues; negative eigenvalues (``D`` is not Euclidean, as edit distances are not) are
    clamped to 0, i.e. those directions are dropped. Each axis's sign is fixed (largest coordinate
    positive) so the same matrix always gives the same picture.
    """
    D = _checked(D)
    n = len(D)
    centring = np.eye(n) - np.full((n, n), 1.0 / n)
    B = -0.5 * centring @ (D**2) @ centring
    values, vectors = np.linalg.eigh((B + B.T) / 2)
    top = np.argsort(values)[::-1][:dims]
    coords: np.ndarray = vectors[:, top] * np.sqrt(np.clip(values[top], 0.0, None))
    for axis in range(coords.shape[1]):
        peak = np.argmax(np.abs(coords[:, axis]))
        if coords[peak, axis] < 0:
            coords[:, axis] = -coords[:, axis]
    if coords.shape[1] < dims:  # fewer points than dimensions asked for
        coords = np.hstack([coords, np.zeros((n, dims - coords.shape[1]))])
    return coords


def _checked(D: np.ndarray) -> np.ndarray:
    D = np.asarray(D, dtype=float)
    if D.ndim != 2 or D.shape[0] != D.shape[1] or D.shape[0] == 0:
        raise ValueError(f"expected a non-empty square distance matrix, got shape {D.shape}")
    return D


def _build(D: np.ndarray, k: int) -> np.ndarray:
    """Greedy start: the most central point, then each time the point that lowers the total most."""
    medoids = [int(np.argmin(D.sum(axis=0)))]
    nearest = D[:, medoids[0]].copy()
    for _ in range(1, k):
        gains = np.maximum(nearest[:, None] - D, 0.0).sum(axis=0)
        gains[medoids] = -np.inf
        chosen = int(np.argmax(gains))
        medoids.append(chosen)
        nearest = np.minimum(nearest, D[:, chosen])
    return np.array(medoids)


def _swap(D: np.ndarray, medoids: np.ndarray) -> np.ndarray:
    """Best-improvement swaps. For removing medoid i and adding point h, a point whose nearest medoid
    is not i moves to h if h is nearer; one whose nearest is i goes to h or to its second nearest, so
    all k x n swap costs come from the nearest and second-nearest distances in one matrix product."""
    n, k = len(D), len(medoids)
    medoids = medoids.copy()
    for _ in range(_MAX_SWAPS):
        to_medoids = D[:, medoids]
        ranked = np.argsort(to_medoids, axis=1, kind="stable")
        cluster = ranked[:, 0]
        near = to_medoids[np.arange(n), cluster]
        second = to_medoids[np.arange(n), ranked[:, 1]] if k > 1 else np.full(n, np.inf)
        to_h = np.minimum(D, near[:, None])  # points x candidates
        change = (to_h - near[:, None]).sum(axis=0)[None, :]
        membership = np.zeros((k, n))
        membership[cluster, np.arange(n)] = 1.0
        # points of cluster i lose medoid i: they pay min(d(h), second) instead of min(d(h), near)
        change = change + membership @ (np.minimum(D, second[:, None]) - to_h)
        change[:, medoids] = np.inf
        flat = int(np.argmin(change))
        out, into = divmod(flat, n)
        if change[out, into] >= -_TOLERANCE:
            break
        medoids[out] = into
    return medoids
