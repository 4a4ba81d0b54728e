"""Validation-split selection: k-means, static and rotating sets, greedy facility location."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mstar_ray.search import subsets
from mstar_ray.search.subsets import (
    choose_validation_split,
    coverage,
    facility_location,
    kmeans,
    representative_set,
    rotating_set,
    training_budget,
)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def blobs(n_blobs: int, per_blob: int, *, dim: int = 32, radius: float = 0.2, seed: int = 0):
    """Well-separated unit-norm blobs around orthonormal centres, shuffled.

    Each blob holds its centre itself plus per_blob - 1 points at angle ~radius from it, so the member
    closest to the blob's mean is unambiguously the planted centre. Returns (points, blob label per
    point, index of each blob's planted centre, the centres).
    """
    rng = np.random.default_rng(seed)
    centres = np.linalg.qr(rng.standard_normal((dim, n_blobs)))[0].T
    rows, labels, is_centre = [], [], []
    for b, centre in enumerate(centres):
        noise = rng.standard_normal((per_blob - 1, dim))
        noise -= np.outer(noise @ centre, centre)
        rows.append(centre[None, :])
        rows.append(unit(centre + radius * unit(noise)))
        labels += [b] * per_blob
        is_centre += [True] + [False] * (per_blob - 1)
    order = rng.permutation(n_blobs * per_blob)
    points = np.vstack(rows)[order]
    labels = np.asarray(labels)[order]
    is_centre = np.asarray(is_centre)[order]
    centre_index = [int(np.flatnonzero(is_centre & (labels == b))[0]) for b in range(n_blobs)]
    return points, labels, centre_index, centres


def random_unit(n: int, dim: int, seed: int) -> np.ndarray:
    return unit(np.random.default_rng(seed).standard_normal((n, dim)))


def naive_greedy(targets: np.ndarray, candidates: np.ndarray, budget: int) -> list[int]:
    """Textbook greedy: each step scans every candidate in index order, strict > so ties keep the lower.
    When no candidate gains anything, a new round starts over the unchosen ones from empty coverage;
    only when a fresh round gains nothing at all do the rest go in index order."""
    sim = np.maximum(unit(targets) @ unit(candidates).T, 0.0)
    remaining = list(range(len(candidates)))
    chosen: list[int] = []
    while remaining and len(chosen) < budget:
        best = np.zeros(len(targets))
        picked_this_round = 0
        while remaining and len(chosen) < budget:
            gains = [float(np.maximum(sim[:, j] - best, 0.0).sum()) for j in remaining]
            top = int(np.argmax(gains))  # the first maximum: ties keep the lower index
            if gains[top] <= 0.0:
                break
            pick = remaining.pop(top)
            chosen.append(pick)
            best = np.maximum(best, sim[:, pick])
            picked_this_round += 1
        if picked_this_round == 0:
            chosen += remaining[: budget - len(chosen)]
            break
    return chosen


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


# ------------------------------------------------------------------------------------------- k-means


def test_kmeans_is_deterministic_for_a_seed():
    x = random_unit(300, 16, seed=1)
    c1, l1 = kmeans(x, 7, seed=5)
    c2, l2 = kmeans(x, 7, seed=5)
    assert np.array_equal(c1, c2) and np.array_equal(l1, l2)


def test_kmeans_recovers_well_separated_blobs():
    x, labels, _, _ = blobs(6, 15, seed=2)
    for seed in range(5):
        centroids, found = kmeans(x, 6, seed=seed)
        assert centroids.shape == (6, x.shape[1])
        assert same_partition(found, labels)


def test_kmeans_labels_are_nearest_centroids():
    x = random_unit(200, 8, seed=3)
    centroids, labels = kmeans(x, 5, seed=0)
    distances = ((x[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
    assert np.array_equal(labels, distances.argmin(axis=1))


def test_kmeans_chunked_distances_match_unchunked(monkeypatch):
    x = random_unit(500, 12, seed=4)
    whole = kmeans(x, 9, seed=3)
    monkeypatch.setattr(subsets, "_BLOCK_ELEMENTS", 20)  # forces blocks of 2 rows
    chunked = kmeans(x, 9, seed=3)
    assert np.array_equal(whole[1], chunked[1])
    assert np.allclose(whole[0], chunked[0])


def test_kmeans_reseeds_an_empty_cluster(monkeypatch):
    x, labels, _, _ = blobs(3, 10, seed=5)
    # A degenerate start: the same point twice, so one cluster is empty after the first assignment.
    monkeypatch.setattr(subsets, "_kmeans_plus_plus", lambda *args: np.array([0, 0, 1]))
    _, found = kmeans(x, 3, seed=0)
    assert np.bincount(found, minlength=3).min() > 0
    assert same_partition(found, labels)


def test_kmeans_survives_identical_points():
    x = np.tile(random_unit(1, 4, seed=6), (5, 1))
    centroids, found = kmeans(x, 3, seed=0)
    assert np.allclose(centroids, x[0]) and set(found.tolist()) <= {0, 1, 2}


# ------------------------------------------------------------------------------------- static set


def test_representative_set_picks_the_centre_of_each_blob():
    x, labels, centre_index, _ = blobs(8, 12, seed=7)
    for seed in range(6):
        chosen = representative_set(x, 8, seed=seed)
        assert sorted(labels[chosen].tolist()) == list(range(8))  # exactly one per blob
        assert chosen == sorted(centre_index)


def test_representative_set_is_sorted_deterministic_and_seed_dependent():
    x, _, _, _ = blobs(30, 8, seed=8)  # more blobs than clusters: seeds merge them differently
    first = representative_set(x, 6, seed=1)
    assert first == sorted(first) and len(set(first)) == 6
    assert representative_set(x, 6, seed=1) == first
    assert len({tuple(representative_set(x, 6, seed=s)) for s in range(6)}) > 1


def test_representative_set_clips_k_and_returns_everything_when_k_covers_all():
    x = random_unit(7, 5, seed=9)
    assert representative_set(x, 7, seed=0) == list(range(7))
    assert representative_set(x, 100, seed=0) == list(range(7))


def test_representative_set_has_k_distinct_members_despite_duplicates():
    x = np.vstack([np.tile(random_unit(1, 4, seed=10), (6, 1)), random_unit(2, 4, seed=11)])
    chosen = representative_set(x, 4, seed=0)
    assert len(set(chosen)) == 4 and chosen == sorted(chosen)


# ----------------------------------------------------------------------------------- rotating set


def test_rotating_set_never_returns_excluded_questions():
    x, _, _, _ = blobs(20, 10, seed=12)
    static = representative_set(x, 20, seed=0)
    for iteration in range(10):
        chosen = rotating_set(x, 5, exclude=static, iteration=iteration, seed=3)
        assert len(chosen) == 5 and not set(chosen) & set(static)
        assert chosen == sorted(chosen)


def test_rotating_set_returns_indices_into_x():
    x, labels, _, _ = blobs(6, 10, seed=13)
    excluded = np.flatnonzero(labels < 2).tolist()  # two whole blobs gone: four remain
    chosen = rotating_set(x, 4, exclude=excluded, iteration=0, seed=0)
    assert sorted(labels[chosen].tolist()) == [2, 3, 4, 5]


def test_rotating_set_is_reproducible_and_rotates():
    x, _, _, _ = blobs(40, 6, dim=64, seed=14)
    static = representative_set(x, 10, seed=0)
    sets = [tuple(rotating_set(x, 5, exclude=static, iteration=i, seed=7)) for i in range(8)]
    assert sets == [tuple(rotating_set(x, 5, exclude=static, iteration=i, seed=7)) for i in range(8)]
    assert len(set(sets)) >= 6
    assert rotating_set(x, 5, exclude=static, iteration=0, seed=8) != list(sets[0])


def test_rotating_set_when_few_or_no_questions_remain():
    x = random_unit(6, 4, seed=15)
    assert rotating_set(x, 5, exclude={0, 1, 2}, iteration=1, seed=0) == [3, 4, 5]
    assert rotating_set(x, 5, exclude=range(6), iteration=1, seed=0) == []
    with pytest.raises(ValueError, match="outside"):
        rotating_set(x, 2, exclude=[6], iteration=0, seed=0)


# ------------------------------------------------------------------------------ facility location


def test_first_pick_has_the_largest_total_similarity():
    for seed in range(5):
        targets, candidates = random_unit(20, 6, seed), random_unit(50, 6, seed + 100)
        totals = np.maximum(targets @ candidates.T, 0.0).sum(axis=0)
        assert facility_location(targets, candidates, 3)[0] == int(totals.argmax())


def test_greedy_matches_the_textbook_greedy():
    for seed in range(6):
        targets, candidates = random_unit(15, 5, seed), random_unit(80, 5, seed + 50)
        assert facility_location(targets, candidates, 12) == naive_greedy(targets, candidates, 12)


def test_greedy_is_within_one_minus_one_over_e_of_the_optimum():
    for seed in range(12):
        targets, candidates = random_unit(8, 4, seed), random_unit(9, 4, seed + 200)
        for budget in (2, 3, 4):
            greedy = coverage(targets, candidates, facility_location(targets, candidates, budget))
            optimum = max(
                coverage(targets, candidates, subset)
                for subset in itertools.combinations(range(9), budget)
            )
            assert greedy >= (1 - 1 / math.e) * optimum - 1e-12


def test_greedy_covers_every_blob_before_repeating_one():
    points, labels, _, centres = blobs(6, 15, seed=16)
    chosen = facility_location(centres, points, 12)
    assert sorted(labels[chosen[:6]].tolist()) == list(range(6))


def test_marginal_gains_never_increase():
    targets, candidates = random_unit(40, 8, seed=17), random_unit(200, 8, seed=18)
    chosen = facility_location(targets, candidates, 30)
    values = [coverage(targets, candidates, chosen[:i]) for i in range(len(chosen) + 1)]
    gains = np.diff(values)
    assert (gains >= -1e-12).all()
    assert (np.diff(gains) <= 1e-12).all()


def test_budget_beyond_candidates_returns_all_in_greedy_order():
    targets, candidates = random_unit(10, 4, seed=19), random_unit(8, 4, seed=20)
    chosen = facility_location(targets, candidates, 50)
    assert sorted(chosen) == list(range(8))
    assert chosen == naive_greedy(targets, candidates, 8)


def test_ties_go_to_the_lower_index():
    candidate = random_unit(1, 5, seed=21)
    targets = random_unit(6, 5, seed=22)
    assert facility_location(targets, np.tile(candidate, (4, 1)), 4) == [0, 1, 2, 3]
    other = random_unit(1, 5, seed=23)
    candidates = np.vstack([other, candidate, candidate])
    assert facility_location(np.vstack([candidate]), candidates, 1) == [1]


def test_once_every_target_is_covered_the_budget_is_filled_in_index_order():
    e = np.eye(4)
    candidates = np.vstack([e[2], e[3], e[0], e[1], unit((e[2] + e[3])[None])[0]])
    assert facility_location(e[:2], candidates, 5) == [2, 3, 0, 1, 4]
    assert facility_location(e[:2], candidates, 3) == [2, 3, 0]


def test_large_inputs_take_the_chunked_path_with_the_same_picks(monkeypatch):
    targets, candidates = random_unit(30, 6, seed=24), random_unit(120, 6, seed=25)
    cached = facility_location(targets, candidates, 25)
    monkeypatch.setattr(subsets, "_CACHE_ELEMENTS", 0)  # no cached matrix
    monkeypatch.setattr(subsets, "_BLOCK_ELEMENTS", 100)  # blocks of 3 candidates or 1 target
    assert facility_location(targets, candidates, 25) == cached


def test_similarity_is_cosine_whatever_the_scale():
    targets, candidates = random_unit(10, 4, seed=26), random_unit(30, 4, seed=27)
    scale = np.random.default_rng(0).uniform(0.1, 10.0, size=(30, 1))
    assert facility_location(targets, candidates * scale, 10) == facility_location(targets, candidates, 10)


def test_coverage_value():
    targets = np.eye(3)
    candidates = np.array([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [1.0, 1.0, 0.0]])
    assert coverage(targets, candidates, []) == 0.0
    assert coverage(targets, candidates, [1]) == 0.0  # negative cosine clipped to 0
    assert coverage(targets, candidates, [0, 2]) == pytest.approx(1.0 + math.sqrt(0.5))


# ------------------------------------------------------------------------------------------- split


@pytest.mark.parametrize(
    ("size", "ratio", "expected"), [(30, 2, 60), (5, 0.5, 3), (7, 0.5, 4), (3, 0.1, 1), (25, 1.5, 38)]
)
def test_training_budget_rounds_half_up(size, ratio, expected):
    assert training_budget(size, ratio) == expected


def test_choose_validation_split_combines_the_two_selections():
    questions, _, _, _ = blobs(10, 8, seed=28)
    texts = random_unit(300, questions.shape[1], seed=29)
    static, train = choose_validation_split(questions, texts, static_size=10, ratio=2, seed=4)
    assert static == representative_set(questions, 10, seed=4)
    assert train == facility_location(questions[static], texts, 20)
    assert len(set(train)) == 20


# -------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: kmeans(np.ones(5), 2, seed=0), "2-D"),
        (lambda: kmeans(random_unit(5, 3, 0), 0, seed=0), "k must be at least 1"),
        (lambda: kmeans(random_unit(5, 3, 0), 6, seed=0), "exceeds"),
        (lambda: kmeans(random_unit(5, 3, 0), 2, seed=-1), "non-negative"),
        (lambda: representative_set(np.full((4, 3), np.nan), 2, seed=0), "NaN"),
        (lambda: representative_set(np.array([[1.0, np.inf]]), 1, seed=0), "NaN or infinite"),
        (lambda: representative_set(np.zeros((0, 3)), 1, seed=0), "at least one row"),
        (lambda: rotating_set(random_unit(5, 3, 0), 0, exclude=[], iteration=0, seed=0), "at least 1"),
        (lambda: facility_location(random_unit(5, 3, 0), random_unit(5, 4, 0), 2), "dimension"),
        (lambda: facility_location(random_unit(5, 3, 0), random_unit(5, 3, 0), 0), "budget"),
        (lambda: facility_location(random_unit(5, 3, 0)[None], random_unit(5, 3, 0), 1), "3-D"),
        (lambda: training_budget(0, 2), "static_size"),
        (lambda: training_budget(10, 0), "ratio"),
        (lambda: choose_validation_split(random_unit(5, 3, 0), random_unit(5, 4, 0), static_size=2,
                                         ratio=2, seed=0), "dimension"),
    ],
)
def test_bad_inputs_raise_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_facility_location_takes_the_given_candidates_first_and_covers_what_they_leave():
    targets, candidates = random_unit(6, 5, 1), random_unit(40, 5, 2)
    free = facility_location(targets, candidates, 8)
    given = [39, 3, 39]  # a repeat counts once
    picks = facility_location(targets, candidates, 8, given=given)
    assert picks[:2] == [39, 3] and len(picks) == len(set(picks)) == 8
    assert coverage(targets, candidates, picks) >= coverage(targets, candidates, [39, 3] + free[:6]) - 1e-12
    assert facility_location(targets, candidates, 1, given=[5, 6, 7]) == [5, 6, 7]  # the budget makes room for them
    with pytest.raises(ValueError, match="given contains 40"):
        facility_location(targets, candidates, 3, given=[40])


def test_the_split_writes_the_static_questions_evidence_whatever_the_budget():
    questions, texts = random_unit(30, 6, 3), random_unit(50, 6, 4)
    evidence = [[(7 * i) % 50, (7 * i + 1) % 50] for i in range(30)]
    for ratio in (0.2, 2.0, 5.0):
        static, train = choose_validation_split(questions, texts, static_size=8, ratio=ratio, seed=1, evidence=evidence)
        needed = sorted({t for i in static for t in evidence[i]})
        assert train[: len(needed)] == needed
        assert len(train) == max(training_budget(len(static), ratio), len(needed))
    assert choose_validation_split(questions, texts, static_size=8, ratio=2, seed=1)[0] == static
    with pytest.raises(ValueError, match="evidence has 2 entries for 30 questions"):
        choose_validation_split(questions, texts, static_size=8, ratio=2, seed=1, evidence=[[0], [1]])
