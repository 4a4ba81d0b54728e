"""The search's budgets as stop conditions, without Ray: which are built from a config's budgets, in which
order they are asked, and the reasons they give (the run's stop_reason, in summary.json)."""

from __future__ import annotations

from mstar_ray.search.stop import (
    REFLECTIONS_PER_CANDIDATE, MaxCandidates, MaxIterations, MaxWall, ReflectionsPerCandidate, SearchCount,
    first_reached, stop_conditions,
)


def count(committed: int = 0, iterations: int = 0, elapsed_s: float = 0.0) -> SearchCount:
    return SearchCount(committed=committed, iterations=iterations, elapsed_s=elapsed_s)


def test_a_budget_builds_its_condition_and_max_iterations_replaces_the_reflection_cap():
    assert stop_conditions(None, None, None) == []
    assert stop_conditions(30, None, None) == [MaxCandidates(30), ReflectionsPerCandidate(30)]
    assert stop_conditions(30, 40, 600.0) == [MaxCandidates(30), MaxIterations(40), MaxWall(600.0)]
    assert stop_conditions(None, 40, None) == [MaxIterations(40)]


def test_each_condition_stops_exactly_at_its_limit():
    assert MaxCandidates(3).reached(count(committed=2)) is None
    assert MaxCandidates(3).reached(count(committed=3)).message == "max_candidates (3) reached"
    assert MaxIterations(4).reached(count(iterations=3)) is None
    assert MaxIterations(4).reached(count(iterations=4)).message == "max_iterations (4) reached"
    assert MaxWall(1.5).reached(count(elapsed_s=1.49)) is None
    assert MaxWall(1.5).reached(count(elapsed_s=1.5)).message == "max_wall_s (1.5 s) reached"
    cap = REFLECTIONS_PER_CANDIDATE * 2
    assert ReflectionsPerCandidate(2).reached(count(iterations=cap - 1)) is None
    assert ReflectionsPerCandidate(2).reached(count(iterations=cap)).message.startswith(f"{cap} reflections gave fewer than")


def test_the_first_condition_reached_in_order_gives_the_reason():
    conditions = stop_conditions(5, 2, 10.0)
    assert first_reached(conditions, count(committed=1, iterations=1, elapsed_s=1.0)) is None
    # all three reached: the run reports the first, the candidates budget
    assert first_reached(conditions, count(committed=5, iterations=2, elapsed_s=11.0)).message == "max_candidates (5) reached"
    assert first_reached(conditions, count(committed=4, iterations=2, elapsed_s=11.0)).message == "max_iterations (2) reached"
    assert first_reached(conditions, count(committed=4, iterations=1, elapsed_s=11.0)).message == "max_wall_s (10 s) reached"
