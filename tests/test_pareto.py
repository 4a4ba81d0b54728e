"""Pareto parent selection: who is on the front (per static question, per category, with the token cost),
how the front is weighted, and that the front kept as members arrive is the one a full comparison finds."""

from __future__ import annotations

import collections
import random

import pytest

from mstar_ray.config_file import ConfigError
from mstar_ray.results import ItemResult
from mstar_ray.run_config import RunConfig
from mstar_ray.search.pareto import ParetoParents
from mstar_ray.search.population import Member, Population

ITEMS = {"q1": "temporal", "q2": "temporal", "q3": "single-hop", "q4": "single-hop"}


def member(name: str, scores: list[float], tokens: int = 0) -> Member:
    results = [ItemResult(id=q, category=c, question=q, expected="x", prediction="x", score=s)
               for (q, c), s in zip(ITEMS.items(), scores)]
    return Member(id=name, source="", parent=None, origin="seed", commit_message=name, iteration=0,
                  score=sum(scores) / len(scores), results=results, tokens=tokens)


def population(*members: Member) -> Population:
    pop = Population()
    for m in members:
        pop.add(m)
    return pop


def front_ids(parents: ParetoParents, pop: Population) -> dict[str, int]:
    return {entry.member.id: entry.best_on for entry in parents.front(pop)}


def test_a_member_alone_best_on_a_hard_question_is_a_parent_however_low_its_mean():
    pop = population(member("mean", [0.0, 0.9, 0.9, 0.9]), member("tail", [1.0, 0.0, 0.0, 0.0]),
                     member("beaten", [0.0, 0.5, 0.5, 0.5]))
    parents = ParetoParents(list(ITEMS))
    assert front_ids(parents, pop) == {"mean": 3, "tail": 1}  # "beaten" is dominated by "mean"
    picks = collections.Counter(parents.choose(pop, random.Random(i)).id for i in range(4000))
    assert set(picks) == {"mean", "tail"}
    assert picks["mean"] / picks["tail"] == pytest.approx(3.0, rel=0.15)  # weighted by the questions each is best on


def test_by_category_a_member_is_compared_on_category_means():
    # better on q1 alone, but no better on the temporal mean (q1 and q2): dominated by categories, not by items
    pop = population(member("a", [0.5, 0.5, 0.5, 0.5]), member("b", [1.0, 0.0, 0.5, 0.5]))
    assert set(front_ids(ParetoParents(list(ITEMS)), pop)) == {"a", "b"}
    by_category = ParetoParents(list(ITEMS), "categories")
    assert front_ids(by_category, pop) == {"a": 2, "b": 2}  # equal means: neither dominates, both best on both
    pop.add(member("c", [0.5, 0.6, 0.5, 0.5]))
    assert front_ids(by_category, pop) == {"c": 2}
    assert by_category.names == ["single-hop", "temporal"]


def test_the_token_cost_as_an_objective_keeps_a_cheaper_equal_member():
    pop = population(member("dear", [1.0, 1.0, 0.0, 0.0], tokens=900), member("cheap", [1.0, 1.0, 0.0, 0.0], tokens=300),
                     member("cheapest", [0.0, 0.0, 0.0, 0.0], tokens=10))
    assert set(front_ids(ParetoParents(list(ITEMS)), pop)) == {"dear", "cheap"}  # equal: neither dominates
    with_cost = ParetoParents(list(ITEMS), cost=True)
    assert front_ids(with_cost, pop) == {"cheap": 4, "cheapest": 3}
    assert with_cost.names[-1] == "tokens"


def test_the_front_kept_as_members_arrive_is_the_full_comparisons():
    rng = random.Random(7)
    for trial in range(30):
        members = [member(f"m{i}", [rng.choice([0.0, 0.25, 0.5, 1.0]) for _ in ITEMS], tokens=rng.randrange(3))
                   for i in range(rng.randrange(1, 25))]
        parents, pop = ParetoParents(list(ITEMS), cost=trial % 2 == 1), Population()
        for m in members:  # asked after every arrival, as the search asks before each reflection
            pop.add(m)
            parents.front(pop)
        values = {m.id: parents.values(m) for m in members}
        dominated = {a for a in values for b in values
                     if a != b and all(values[b] >= values[a]) and any(values[b] > values[a])}
        assert set(front_ids(parents, pop)) == set(values) - dominated


def test_pareto_is_configured_by_its_section_and_a_bad_value_names_its_key(tmp_path):
    config = RunConfig.model_validate({"search": {"parent_selection": "pareto",
                                                  "pareto": {"objectives": "categories", "cost": True}}})
    assert config.search.pareto.objectives == "categories" and config.search.pareto.cost
    path = tmp_path / "bad.yaml"
    path.write_text("search:\n  parent_selection: pareto\n  pareto: {objectives: questions}\n")
    from mstar_ray.run_config import load_run_config

    with pytest.raises(ConfigError, match="search.pareto.objectives"):
        load_run_config(path)
