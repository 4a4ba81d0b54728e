"""k-medoids, the silhouette and classical MDS on distance matrices whose answers are known."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mstar_ray.structure.clusters import choose_k, classical_mds, k_medoids, silhouette

CENTRES = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])


def euclidean(points: np.ndarray) -> np.ndarray:
    return np.linalg.norm(points[:, None, :] - points[None, :, :], axis=2)


def blobs(seed: int, per_blob: int = 15) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    points = np.vstack([rng.normal(centre, 0.5, (per_blob, 2)) for centre in CENTRES])
    truth = np.repeat(np.arange(len(CENTRES)), per_blob)
    order = rng.permutation(len(points))  # clusters must not be recoverable from the index
    return points[order], truth[order]


def total_cost(D: np.ndarray, medoids) -> float:
    return float(D[:, list(medoids)].min(axis=1).sum())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_k_medoids_recovers_planted_clusters(seed):
    points, truth = blobs(seed)
    D = euclidean(points)
    medoids, labels = k_medoids(D, 3, seed=seed)
    assert len(medoids) == 3 and list(medoids) == sorted(medoids)
    # same partition up to naming: each found cluster is exactly one planted cluster
    assert len({(f, t) for f, t in zip(labels, truth)}) == 3
    assert sorted(truth[medoids]) == [0, 1, 2]
    assert np.array_equal(labels[medoids], np.arange(3))
    assert np.array_equal(labels, np.argmin(D[:, medoids], axis=1))


def test_k_medoids_is_deterministic_and_a_local_optimum():
    rng = np.random.default_rng(4)
    D = euclidean(rng.uniform(0, 1, (18, 3)))
    medoids, labels = k_medoids(D, 4, seed=11)
    again = k_medoids(D, 4, seed=11)
    assert np.array_equal(medoids, again[0]) and np.array_equal(labels, again[1])
    cost = total_cost(D, medoids)
    for out, into in itertools.product(range(4), set(range(18)) - set(medoids)):
        swapped = list(medoids)
        swapped[out] = into
        assert total_cost(D, swapped) >= cost - 1e-12
    # on so small a problem PAM finds the optimum
    best = min(total_cost(D, chosen) for chosen in itertools.combinations(range(18), 4))
    assert cost == pytest.approx(best)


def test_k_medoids_edge_cases():
    D = euclidean(np.array([[0.0], [1.0], [5.0]]))
    medoids, labels = k_medoids(D, 10, seed=0)
    assert list(medoids) == [0, 1, 2] and list(labels) == [0, 1, 2]
    medoids, labels = k_medoids(D, 1, seed=0)
    assert list(medoids) == [1] and list(labels) == [0, 0, 0]
    # duplicates (identical programs at distance 0): still k distinct medoids
    medoids, labels = k_medoids(np.zeros((5, 5)), 2, seed=3)
    assert len(set(medoids)) == 2 and set(labels) == {0, 1}
    with pytest.raises(ValueError):
        k_medoids(D, 0, seed=0)
    with pytest.raises(ValueError):
        k_medoids(np.zeros((2, 3)), 1, seed=0)


def test_silhouette_matches_its_definition():
    rng = np.random.default_rng(5)
    D = euclidean(rng.uniform(0, 1, (12, 2)))
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3])  # 3 is a singleton, which scores 0
    expected = []
    for i in range(12):
        mine = [j for j in range(12) if labels[j] == labels[i] and j != i]
        if not mine:
            expected.append(0.0)
            continue
        a = np.mean(D[i, mine])
        b = min(np.mean(D[i, labels == other]) for other in set(labels) - {labels[i]})
        expected.append((b - a) / max(a, b))
    assert silhouette(D, labels) == pytest.approx(np.mean(expected))
    with pytest.raises(ValueError):
        silhouette(D, np.zeros(12, dtype=int))


def test_choose_k():
    points, _ = blobs(0)
    assert choose_k(euclidean(points), k_max=8, seed=0) == 3
    assert choose_k(euclidean(points[:2]), k_max=8, seed=0) == 1  # too few to split
    assert choose_k(np.zeros((6, 6)), k_max=4, seed=0) == 1  # all identical
    assert choose_k(euclidean(points), k_max=1, seed=0) == 1
    # no structure: a high-dimensional Gaussian's points are all about equally far apart, and no split
    # reaches a substantial silhouette
    noise = np.random.default_rng(1).normal(0, 1, (40, 50))
    assert choose_k(euclidean(noise), k_max=6, seed=0) == 1


def test_mds_reproduces_planar_distances_up_to_rotation():
    rng = np.random.default_rng(6)
    points = rng.uniform(-3, 3, (25, 2))
    coords = classical_mds(euclidean(points), dims=2)
    assert coords.shape == (25, 2)
    assert np.allclose(euclidean(coords), euclidean(points), atol=1e-8)
    # the map is the original up to translation and an orthogonal transform
    centred = points - points.mean(axis=0)
    rotation, *_ = np.linalg.lstsq(coords, centred, rcond=None)
    assert np.allclose(rotation @ rotation.T, np.eye(2), atol=1e-8)
    assert np.allclose(coords @ rotation, centred, atol=1e-8)
    assert np.array_equal(classical_mds(euclidean(points)), coords)  # same matrix, same picture


def test_mds_of_non_euclidean_and_tiny_matrices():
    # a star metric is not Euclidean: negative eigenvalues are dropped, not turned into NaN
    star = np.array([[0, 1, 1, 1], [1, 0, 2, 2], [1, 2, 0, 2], [1, 2, 2, 0]], dtype=float)
    coords = classical_mds(star, dims=3)
    assert coords.shape == (4, 3) and np.all(np.isfinite(coords))
    assert np.array_equal(classical_mds(np.zeros((1, 1))), np.zeros((1, 2)))
    assert classical_mds(euclidean(np.array([[0.0], [3.0]]))).shape == (2, 2)
