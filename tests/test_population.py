"""Parent selection (softmax with temperature; the greedy and chain ablations: ``search.parents``) and lineage."""

from __future__ import annotations

import random

import pytest

from mstar_ray.search.parents import Chain, Greedy, Softmax, parent_rule, softmax_weights
from mstar_ray.results import ItemResult
from mstar_ray.search.population import Member, Population


def member(id_: str, score: float, parent: str | None = None) -> Member:
    return Member(id=id_, source="", parent=parent, origin="seed" if parent is None else "reflection",
                  commit_message=id_, iteration=0, score=score)


@pytest.fixture
def population() -> Population:
    pop = Population()
    for m in (member("a", 0.30), member("b", 0.45, "a"), member("c", 0.45, "b"), member("d", 0.10, "a")):
        pop.add(m)
    return pop


def test_softmax_weights_follow_the_formula():
    weights = softmax_weights([0.3, 0.45], 0.15)
    assert sum(weights) == pytest.approx(1.0)
    assert weights[1] / weights[0] == pytest.approx(2.718281828 ** ((0.45 - 0.3) / 0.15))
    assert softmax_weights([1000.0, 999.0], 0.01)[0] > 0.99  # no overflow


def test_softmax_prefers_better_parents_and_tau_sharpens(population):
    def share_of_best(tau: float) -> float:
        rng = random.Random(0)
        picks = [Softmax(tau).choose(population, rng).id for _ in range(4000)]
        return (picks.count("b") + picks.count("c")) / len(picks)

    assert share_of_best(0.05) > share_of_best(0.15) > share_of_best(1.0) > 0.5


def test_greedy_takes_the_best_and_the_earlier_of_a_tie(population):
    assert Greedy().choose(population, random.Random(0)).id == "b"
    assert population.best().id == "b"


def test_chain_takes_the_newest(population):
    assert Chain().choose(population, random.Random(0)).id == "d"


def test_every_rule_but_best_of_n_lends_from_the_whole_population(population):
    for selection in ("softmax", "greedy", "chain", "pareto"):
        rule = parent_rule(selection, tau=0.15, static_ids=["q"])
        assert rule.donors(population) == population.members
    assert [m.id for m in parent_rule("seeds", tau=0.15, static_ids=["q"]).donors(population)] == ["a"]


def test_ancestors_run_from_the_seed_down(population):
    assert [m.id for m in population.ancestors("c")] == ["a", "b"]


def test_a_member_is_added_once(population):
    with pytest.raises(ValueError, match="already"):
        population.add(member("a", 0.3))


def answered(id_: str, score: float, parent: str | None, answers: dict[str, str]) -> Member:
    results = [ItemResult(id=q, category="c", question=q, expected="e", prediction=a, score=score) for q, a in answers.items()]
    return member(id_, score, parent).model_copy(update={"results": results})


def test_a_child_that_answers_as_its_parent_is_not_drawn_as_a_parent_again():
    pop = Population()
    pop.add(answered("seed", 0.4, None, {"q1": "Fiat", "q2": "Lisbon"}))
    # the same answers to every question both were asked (a rotating question of its own aside): its parent again
    pop.add(answered("clone", 0.4, "seed", {"q1": "Fiat", "q2": "Lisbon", "q3": "pottery"}))
    # one answer differs, though the score is the same: another program
    pop.add(answered("other", 0.4, "seed", {"q1": "Fiat", "q2": "Porto"}))
    pop.add(answered("better", 0.5, "seed", {"q1": "Fiat", "q2": "Lisbon"}))
    assert [m.id for m in pop.distinct()] == ["seed", "other", "better"]
    rng = random.Random(0)
    picks = {Softmax(0.15).choose(pop, rng).id for _ in range(2000)}
    assert picks == {"seed", "other", "better"}
    # the clone still counts for everything else: it is a member, a donor, and may be the best
    assert "clone" in pop and pop.get("clone") in Softmax(0.15).donors(pop)
