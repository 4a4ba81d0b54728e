"""The split of a real task: the training texts hold the static (and each iteration's rotating) questions'
evidence, a confirmation slice stays out of every other set, and the same inputs rebuild the same split
(what a resume checks against split.json). No Ray; the hashing embedder keeps it fast."""

from __future__ import annotations

import pytest

from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.search.split import SplitPlan, confirmation_slice
from mstar_ray.search.subsets import training_budget
from mstar_ray.families.qa.locomo import DataNotFoundError, find_locomo_file, load_locomo
from mstar_ray.tasks.model import Item, RawText, Task
from mstar_ray.families.qa.synthetic import make_synthetic


@pytest.fixture(scope="module")
def locomo_turns() -> Task:
    try:
        return load_locomo(find_locomo_file(), conversation=0, granularity="turn")
    except DataNotFoundError:
        pytest.skip("LoCoMo data file not available")


def plan(task: Task, **overrides) -> SplitPlan:
    options = {"test_fraction": 0.3, "static_size": 30, "rotating_size": 5, "train_ratio": 2.0, "seed": 0,
               "confirmation_size": 20, **overrides}
    return SplitPlan(task, HashingEmbedder(), **options)


def test_one_text_per_turn_still_writes_every_static_questions_evidence(locomo_turns):
    chosen = plan(locomo_turns)
    split = chosen.split
    needed = chosen.evidence_texts(split.static)
    assert split.evidence_texts == needed and set(needed) <= set(split.train_texts)
    assert split.static_evidence == 1.0 and chosen.evidence_share(split.train_texts, split.static)[0] == 1.0
    assert len(split.train_texts) == max(training_budget(30, 2.0), len(needed)) < len(locomo_turns.texts)
    order = [t.id for t in locomo_turns.texts]
    assert split.train_texts == sorted(split.train_texts, key=order.index)  # written as the conversation went


def test_a_small_budget_grows_to_hold_the_evidence(locomo_turns):
    split = plan(locomo_turns, train_ratio=0.2).split
    assert split.train_texts == split.evidence_texts and split.static_evidence == 1.0


def test_each_iteration_also_writes_its_rotating_questions_evidence(locomo_turns):
    chosen = plan(locomo_turns)
    base = set(chosen.split.train_texts)
    grew = 0
    for iteration in range(1, 6):
        rotating = chosen.rotating(iteration)
        questions = chosen.split.static + rotating
        written = chosen.written(questions)
        assert set(chosen.evidence_texts(rotating)) | base == set(written)
        assert chosen.evidence_share(written, questions)[0] == 1.0
        grew += len(written) > len(base)
    assert grew  # some rotating evidence lay outside the training texts


def test_the_confirmation_slice_is_fresh(locomo_turns):
    chosen = plan(locomo_turns)
    split = chosen.split
    assert len(split.confirmation) == 20
    assert set(split.confirmation) <= set(split.validation)
    assert not set(split.confirmation) & (set(split.static) | set(split.test))
    for iteration in range(1, 20):
        assert not set(split.confirmation) & set(chosen.rotating(iteration))


def test_the_confirmation_slice_leaves_the_rotating_set_its_questions():
    assert confirmation_slice([f"q{i}" for i in range(10)], 8, 5, seed=0) == confirmation_slice(
        [f"q{i}" for i in reversed(range(10))], 8, 5, seed=0)
    assert len(confirmation_slice([f"q{i}" for i in range(10)], 8, 5, seed=0)) == 5
    assert confirmation_slice([f"q{i}" for i in range(4)], 8, 5, seed=0) == []


def test_the_same_inputs_rebuild_the_same_split(locomo_turns):
    first, second = plan(locomo_turns), plan(locomo_turns)
    assert first.split == second.split
    assert [first.rotating(i) for i in range(1, 8)] == [second.rotating(i) for i in range(1, 8)]
    assert plan(locomo_turns, seed=1).split != first.split


def test_sessions_as_texts_hold_the_evidence_too():
    task = make_synthetic(seed=1)
    split = plan(task, static_size=10, rotating_size=2, train_ratio=0.5, confirmation_size=6).split
    assert split.static_evidence == 1.0 and set(split.evidence_texts) <= set(split.train_texts)
    assert all(t.startswith("S") for t in split.train_texts) and len(split.confirmation) == 6


def test_a_task_that_places_no_evidence_still_splits():
    texts = [RawText(id=f"t{i}", text=f"note number {i} about topic {i % 4}") for i in range(12)]
    questions = [Item(id=f"q{i}", question=f"what about topic {i % 4}?", answer="x", category="c") for i in range(20)]
    split = plan(Task(name="plain", texts=texts, items=questions), static_size=5, confirmation_size=3).split
    assert split.static_evidence is None and split.evidence_texts == []
    assert len(split.train_texts) == 10 and len(split.confirmation) == 3
