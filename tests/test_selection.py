"""The noise in a static score and the rule that picks a run's program: bootstrap intervals, the paired
decision, contenders and their confirmation, and the sentence the summary gives. No Ray."""

from __future__ import annotations

import random

import pytest

from mstar_ray.results import ItemResult
from mstar_ray.search.noise import bootstrap_interval, paired_interval
from mstar_ray.search.population import Member
from mstar_ray.search.selection import Confirmation, Incumbent, replay, static_scores

STATIC = [f"q{i}" for i in range(30)]


def member(name: str, scores: list[float], origin: str = "mutation:x") -> Member:
    results = [ItemResult(id=q, category="c", question="?", expected="a", score=s) for q, s in zip(STATIC, scores)]
    results.append(ItemResult(id="rotating-1", category="c", question="?", expected="a", score=1.0))
    return Member(id=name, source="", parent=None if origin == "seed" else "s", origin=origin, commit_message=name,
                  iteration=0, score=sum(scores) / len(scores), results=results)


def noisy(seed: int, mean: float) -> list[float]:
    rng = random.Random(seed)
    return [min(1.0, max(0.0, rng.gauss(mean, 0.3))) for _ in STATIC]


# ------------------------------------------------------------------------------------------------ noise


def test_the_bootstrap_interval_is_deterministic_and_holds_the_mean():
    scores = noisy(1, 0.4)
    low, high = bootstrap_interval(scores, seed=3)
    assert (low, high) == bootstrap_interval(scores, seed=3)
    assert low < sum(scores) / len(scores) < high
    assert bootstrap_interval(scores, seed=4) != (low, high)  # the seed is the only source of randomness
    assert bootstrap_interval([0.5] * 30, seed=3) == (0.5, 0.5)


def test_more_questions_give_a_narrower_interval():
    few = bootstrap_interval(noisy(2, 0.4)[:8], seed=0)
    many = bootstrap_interval(noisy(2, 0.4) * 8, seed=0)
    assert many[1] - many[0] < (few[1] - few[0]) / 2


def test_the_paired_interval_sees_a_steady_small_gain_that_separate_intervals_miss():
    base = noisy(5, 0.4)
    better = [min(1.0, s + 0.05) for s in base]
    a, b = bootstrap_interval(better, seed=0), bootstrap_interval(base, seed=0)
    assert a[0] < b[1]  # the two intervals overlap...
    low, high = paired_interval(better, base, seed=0)
    assert 0.0 < low <= high  # ...but on the same questions the gain is beyond the noise
    assert paired_interval(base, base, seed=0) == (0.0, 0.0)


@pytest.mark.parametrize("call, message", [
    (lambda: bootstrap_interval([], seed=0), "non-empty"),
    (lambda: bootstrap_interval([0.1, float("nan")], seed=0), "NaN"),
    (lambda: paired_interval([0.1, 0.2], [0.1], seed=0), "same questions"),
    (lambda: bootstrap_interval([0.1], seed=0, level=1.0), "level"),
    (lambda: bootstrap_interval([0.1], seed=0, resamples=0), "resamples"),
])
def test_bad_input_is_refused_clearly(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --------------------------------------------------------------------------------------------- selection


def test_among_seeds_the_higher_static_score_starts_and_a_lucky_child_does_not_replace_it():
    seed_a, seed_b, seed_c = (member(f"seed-{n}", [v] * 30, "seed") for n, v in (("a", 0.4), ("b", 0.41), ("c", 0.0)))
    incumbent = Incumbent(STATIC, seed=0)
    assert incumbent.offer(seed_a).verdict == "replaces"
    assert incumbent.offer(seed_b).verdict == "replaces"  # a seed needs no more than a higher score
    assert incumbent.offer(seed_c).verdict == "kept" and incumbent.best.id == "seed-b"
    lucky = member("lucky", [0.9 if i % 5 == 0 else 0.2 if i % 5 == 1 else 0.41 for i in range(30)])
    challenge = incumbent.offer(lucky)
    assert lucky.score > seed_b.score and challenge.verdict == "contender" and challenge.low < 0.0 < challenge.high
    assert incumbent.best.id == "seed-b" and incumbent.contender().challenger == "lucky"
    assert static_scores(lucky, STATIC) == [r.score for r in lucky.results[:30]]  # the rotating result is left out


def test_a_child_better_beyond_the_noise_replaces_the_best_and_a_worse_one_is_kept_out():
    seed = member("seed", noisy(1, 0.3), "seed")
    incumbent = replay([seed], STATIC, seed=0)
    better = member("better", [min(1.0, s + 0.2) for s in static_scores(seed, STATIC)])
    worse = member("worse", [max(0.0, s - 0.1) for s in static_scores(seed, STATIC)])
    assert incumbent.offer(worse).verdict == "kept"
    challenge = incumbent.offer(better)
    assert challenge.verdict == "replaces" and challenge.incumbent == "seed" and challenge.low > 0
    selection = incumbent.select()
    assert selection.chosen == "better" and selection.rule == "paired bootstrap"
    assert "better replaced seed" in selection.how and "above zero" in selection.how
    assert [c.challenger for c in selection.replacements] == ["seed", "better"]


def test_without_a_better_child_the_best_seed_is_returned_and_the_summary_says_why():
    seed = member("seed", noisy(1, 0.3), "seed")
    incumbent = replay([seed, member("same", static_scores(seed, STATIC))], STATIC, seed=0)
    selection = incumbent.select()
    assert selection.chosen == "seed" and selection.rule == "best seed"
    assert "no child was better beyond the noise" in selection.how


def contest() -> tuple[Incumbent, Member, Member]:
    seed = member("seed", noisy(1, 0.3), "seed")
    scores = static_scores(seed, STATIC)
    contender = member("contender", [min(1.0, s + 0.5) if i in (3, 9) else s for i, s in enumerate(scores)])
    incumbent = replay([seed, contender], STATIC, seed=0)
    return incumbent, seed, contender


def test_a_contender_is_settled_by_the_confirmation_slice():
    incumbent, seed, contender = contest()
    assert incumbent.contender().challenger == "contender"
    win = Confirmation(incumbent="seed", contender="contender", questions=20, incumbent_score=0.30, contender_score=0.34)
    selection = incumbent.select(win)
    assert selection.chosen == "contender" and selection.rule == "confirmation"
    assert "on 20 fresh validation questions the contender scored 0.340 and the incumbent 0.300" in selection.how


def test_a_contender_that_does_not_hold_up_on_fresh_questions_loses_ties_included():
    for score in (0.29, 0.30):
        incumbent, _, _ = contest()
        loss = Confirmation(incumbent="seed", contender="contender", questions=20, incumbent_score=0.30,
                            contender_score=score)
        assert incumbent.select(loss).chosen == "seed"


def test_without_a_confirmation_slice_the_contender_is_named_but_not_taken():
    incumbent, _, _ = contest()
    selection = incumbent.select(None)
    assert selection.chosen == "seed" and "contender scored" in selection.how and "no confirmation slice" in selection.how


def test_a_confirmation_of_other_programs_is_refused():
    incumbent, _, _ = contest()
    with pytest.raises(ValueError, match="not of the incumbent and the contender"):
        incumbent.select(Confirmation(incumbent="x", contender="y", questions=1, incumbent_score=0, contender_score=1))


def test_a_late_contender_beyond_the_noise_of_the_final_incumbent_is_taken_without_confirmation():
    seed = member("seed", [0.0] * 30, "seed")
    first = member("first", [1.0 if i < 12 else 0.0 for i in range(30)])  # replaces the seed
    second = member("second", [1.0 if i < 24 else 0.0 for i in range(30)])  # beats "first" beyond the noise too
    incumbent = replay([seed, second, first], STATIC, seed=0)
    assert incumbent.best.id == "second"
    assert incumbent.select().chosen == "second" and incumbent.contender() is None


def test_the_replay_is_the_same_whatever_process_runs_it():
    members = [member("seed", noisy(1, 0.3), "seed"), *[member(f"c{i}", noisy(10 + i, 0.32)) for i in range(12)]]
    first, second = replay(members, STATIC, seed=7), replay(members, STATIC, seed=7)
    assert first.best.id == second.best.id and first.replacements == second.replacements
    assert [first.interval(m) for m in members] == [second.interval(m) for m in members]


def test_an_empty_static_set_is_refused():
    with pytest.raises(ValueError, match="static set is empty"):
        Incumbent([], seed=0)


def test_with_every_seed_passed_over_the_first_child_left_is_chosen_and_the_sentence_says_so():
    """The issue's case: the best seed failed its test and no other seed was scored, so the next by the rule is a
    child that no earlier program was set against (its challenge has no lead): the sentence must not need one."""
    seed, child, weaker = member("s", [0.5] * 30, origin="seed"), member("c", [0.6] * 30), member("w", [0.2] * 30)
    incumbent = replay([seed, child, weaker], STATIC, seed=0)
    left = incumbent.without({"s"})
    selection = left.select(None)
    assert selection.chosen == "c" and selection.rule == "paired bootstrap"
    assert "none of them a seed" in selection.how and "None" not in selection.how
