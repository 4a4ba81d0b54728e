"""The structural distance matrix computed as Ray tasks equals the one computed in process."""

from __future__ import annotations

import numpy as np
import pytest

from mstar_ray.structure.matrix import pairwise
from mstar_ray.structure.tree import program_tree
from tests.conftest import seed_source
from tests.test_structure_ted import SEEDS, mutants


@pytest.fixture(scope="module")
def local_ray():
    import ray

    # address="local": always a Ray of our own, never one already running on the machine
    from mstar_ray.driver.cluster import start_local_ray

    start_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_pairwise_on_ray_equals_pairwise(local_ray):
    from mstar_ray.actors.structure_tasks import pairwise_on_ray

    trees = [program_tree(source, "names") for source in SEEDS + mutants(5, seed=2)]
    expected = pairwise(trees)
    assert np.count_nonzero(expected) > 0
    for blocks in (None, 1, 3, 100):
        assert np.array_equal(pairwise_on_ray(trees, blocks=blocks), expected)
    single = [program_tree(seed_source("vector_search"))]
    assert np.array_equal(pairwise_on_ray(single), np.zeros((1, 1)))


def test_a_small_population_is_measured_in_process_and_a_large_one_on_ray(local_ray, monkeypatch):
    from mstar_ray.actors import structure_tasks

    trees = [program_tree(source, "names") for source in SEEDS + mutants(5, seed=2)]
    spread: list[int] = []
    monkeypatch.setattr(structure_tasks, "pairwise_on_ray", lambda t: spread.append(len(t)) or pairwise(t))
    assert np.array_equal(structure_tasks.population_matrix(trees), pairwise(trees)) and spread == []
    monkeypatch.setattr(structure_tasks, "LOCAL_PAIRS", 3)
    structure_tasks.population_matrix(trees)
    assert spread == [len(trees)]
