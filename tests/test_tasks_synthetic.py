"""The synthetic task: determinism, answerability from evidence, and the registry around it."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from mstar_ray.families.qa import synthetic
from mstar_ray.tasks.model import Item, Task, limit_items
from mstar_ray.families.task_registry import TASK_NAMES, load_task
from mstar_ray.families.qa.synthetic import CATEGORIES, make_synthetic
from tests.work_count import lines_run

CONFIGS = [
    {"seed": seed, "sessions": sessions, "personas": personas}
    for seed in range(12)
    for sessions, personas in ((16, 2), (20, 3), (30, 6), (4, 2))
]
HEADER = re.compile(r"^\[(\d{1,2} [A-Z][a-z]+ \d{4})\] ([A-Z][a-z]+): ")


def _speaker(text: str) -> str:
    match = HEADER.match(text)
    assert match, text
    return match.group(2)


def _turns(**kwargs) -> Task:
    """The task with one text per turn: the generator's properties are checked turn by turn."""
    return make_synthetic(granularity="turn", **kwargs)


def _mentions(text: str, value: str) -> bool:
    return re.search(rf"\b{re.escape(value)}\b", text) is not None


def test_same_seed_same_task_and_no_global_random() -> None:
    random.seed(12345)
    state = random.getstate()
    first = make_synthetic(seed=3)
    assert random.getstate() == state  # the global generator is never touched
    random.seed(999)
    assert make_synthetic(seed=3) == first
    assert make_synthetic(seed=3).model_dump_json() == first.model_dump_json()


def test_different_seeds_differ() -> None:
    tasks = [make_synthetic(seed=s) for s in range(5)]
    assert len({t.model_dump_json() for t in tasks}) == 5
    assert len({t.texts[0].text for t in tasks}) > 1
    assert len({tuple(q.answer for q in t.items) for t in tasks}) == 5


def test_a_task_is_made_in_bounded_work() -> None:
    """Cheap enough to make in every test that needs one: counted in Python lines run (some 16,000), not timed."""
    assert max(lines_run(lambda: make_synthetic(seed=seed)) for seed in range(5)) < 40_000


def test_shape_and_categories() -> None:
    assert make_synthetic(seed=7).name == "synthetic/seed-7"
    task = _turns(seed=7)
    assert task.name == "synthetic/seed-7/turns"
    assert Counter(q.category for q in task.items) == {c: 10 for c in CATEGORIES}
    assert set(CATEGORIES) == {"single-hop", "temporal", "knowledge-update", "multi-hop"}
    assert len({q.id for q in task.items}) == len(task.items)
    assert len({t.id for t in task.texts}) == len(task.texts)
    sessions = {t.id.split(":")[0] for t in task.texts}
    assert len(sessions) == 16
    assert len(task.texts) > 150  # plenty of turns, so retrieval matters
    assert len({_speaker(t.text) for t in task.texts}) == 2
    assert all(HEADER.match(t.text) for t in task.texts)


def test_dates_increase_across_sessions() -> None:
    task = _turns(seed=11)
    months = {m: i for i, m in enumerate(synthetic.MONTHS, start=1)}
    seen: list[tuple[int, int, int]] = []
    for text in task.texts:
        if text.id.endswith(":1"):
            day, month, year = HEADER.match(text.text).group(1).split()
            seen.append((int(year), months[month], int(day)))
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert seen[-1][:2] != seen[0][:2]  # spans more than one month


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"seed{c['seed']}-s{c['sessions']}-p{c['personas']}")
def test_every_answer_is_in_its_evidence(config: dict[str, int]) -> None:
    task = _turns(**config)
    texts = {t.id: t.text for t in task.texts}
    speakers = {_speaker(t.text) for t in task.texts}
    assert len(speakers) == config["personas"]
    for q in task.items:
        assert q.evidence, q
        assert all(e in texts for e in q.evidence), q
        assert any(q.answer in texts[e] for e in q.evidence), q
        if q.category == "temporal":
            (only,) = q.evidence
            assert texts[only].startswith(f"[{q.answer}] ")
            assert re.search(r"\b(today|tonight)\b", texts[only], re.IGNORECASE), texts[only]
        elif q.category == "multi-hop":
            assert len(set(q.evidence)) == 2, q
            assert not any(_mentions(q.question, name) for name in speakers), q  # the person must be inferred
        else:
            assert len(q.evidence) == 1, q


@pytest.mark.parametrize("seed", range(10))
def test_knowledge_update_answers_are_the_latest_value(seed: int) -> None:
    task = _turns(seed=seed, personas=3, sessions=20)
    speakers = {_speaker(t.text) for t in task.texts}
    updates = [q for q in task.items if q.category == "knowledge-update"]
    assert updates
    for q in updates:
        (person,) = [name for name in speakers if _mentions(q.question, name)]
        (pool,) = [pool for pool in synthetic.UPDATABLE.values() if q.answer in pool]
        # The persona's own turns that name any value of this attribute, oldest first.
        own = [t for t in task.texts if _speaker(t.text) == person and any(_mentions(t.text, v) for v in pool)]
        assert own[-1].id == q.evidence[0]
        assert _mentions(own[-1].text, q.answer)
        older_values = {v for t in own[:-1] for v in pool if _mentions(t.text, v)} - {q.answer}
        assert older_values, f"no superseded value stated before {q}"
        assert not any(_mentions(t.text, q.answer) for t in own[:-1])


def test_knowledge_update_disagrees_with_first_statement() -> None:
    # A memory that keeps only the first statement of each attribute must get these questions wrong.
    task = _turns(seed=2)
    texts = {t.id: t for t in task.texts}
    order = {t.id: i for i, t in enumerate(task.texts)}
    for q in (q for q in task.items if q.category == "knowledge-update"):
        (pool,) = [pool for pool in synthetic.UPDATABLE.values() if q.answer in pool]
        person = _speaker(texts[q.evidence[0]].text)
        first = next(t for t in task.texts if _speaker(t.text) == person and any(_mentions(t.text, v) for v in pool))
        assert order[first.id] < order[q.evidence[0]]
        assert not _mentions(first.text, q.answer)


@pytest.mark.parametrize("seed", range(4))
def test_sessions_are_the_default_texts_and_hold_the_same_turns(seed: int) -> None:
    sessions, turns = make_synthetic(seed=seed), _turns(seed=seed)
    assert [t.id for t in sessions.texts] == [f"S{n}" for n in range(1, 17)]
    assert sessions.items == turns.items  # the conversation and the questions do not depend on the cut
    evidence = sessions.evidence()
    assert list(evidence) == [t.id for t in turns.texts]
    for turn in turns.texts:
        date, line = turn.text[1:].split("] ", 1)
        holder = sessions.texts[int(evidence[turn.id].text_id[1:]) - 1]
        assert evidence[turn.id] == (holder.id, line) and holder.text.startswith(f"[{date}]\n")
        assert turn.id.startswith(f"D{holder.id[1:]}:")
    for q in sessions.items:  # every answer still stands in the text that holds its evidence
        assert any(q.answer in evidence[e].text or q.answer in sessions.texts[int(evidence[e].text_id[1:]) - 1].text
                   for e in q.evidence)


def test_pool_values_never_contain_each_other() -> None:
    pools = [
        synthetic.FIRST_NAMES, synthetic.CITIES, synthetic.JOBS, synthetic.HOBBIES, synthetic.LANGUAGES,
        synthetic.CARS, synthetic.FOODS, synthetic.PET_SPECIES, synthetic.PET_NAMES, synthetic.BANDS,
        synthetic.BOOKS, synthetic.COUNTRIES, synthetic.RACES,
    ]  # fmt: skip
    values = [v for pool in pools for v in pool]
    assert len(values) == len(set(values))
    for a in values:
        for b in values:
            if a != b:
                assert not re.search(rf"\b{re.escape(a.lower())}\b", b.lower()), (a, b)


def test_fillers_carry_no_pool_values() -> None:
    pools = [synthetic.CITIES, synthetic.JOBS, synthetic.HOBBIES, synthetic.LANGUAGES, synthetic.CARS]
    lines = [line for line, _ in synthetic._FILLERS] + [r for rs in synthetic._FILLER_REPLIES.values() for r in rs]
    for line in lines:
        assert not any(_mentions(line.lower(), v.lower()) for pool in pools for v in pool), line


def test_argument_validation() -> None:
    with pytest.raises(ValueError, match="personas"):
        make_synthetic(personas=1)
    with pytest.raises(ValueError, match="too few"):
        make_synthetic(sessions=4, personas=4)
    with pytest.raises(ValueError, match="questions_per_category"):
        make_synthetic(questions_per_category=0)
    small = make_synthetic(seed=1, questions_per_category=3)
    assert Counter(q.category for q in small.items) == {c: 3 for c in CATEGORIES}
    assert small.name != make_synthetic(seed=1).name  # different tasks never share a name


# ---------------------------------------------------------------------------------------------------------
# Registry


def test_registry_builds_synthetic() -> None:
    assert load_task("synthetic", seed=4) == make_synthetic(seed=4)
    assert load_task(" Synthetic ", seed=4).name == "synthetic/seed-4"


def test_registry_limit_covers_every_category() -> None:
    task = load_task("synthetic", seed=5, limit=4)
    assert [q.category for q in task.items] == list(CATEGORIES)
    assert len(task.texts) == len(make_synthetic(seed=5).texts)
    assert len(load_task("synthetic", seed=5, limit=1000).items) == 40


def test_registry_unknown_name_lists_valid_ones() -> None:
    with pytest.raises(ValueError) as caught:
        load_task("nope")
    assert all(name in str(caught.value) for name in TASK_NAMES)
    assert {"beam", "locomo", "synthetic"} <= set(TASK_NAMES)


def _q(index: int, category: str) -> Item:
    return Item(id=f"t/q{index}", question="?", answer="a", category=category)


def test_limit_questions_round_robin_in_original_order() -> None:
    questions = [_q(0, "a"), _q(1, "a"), _q(2, "a"), _q(3, "b"), _q(4, "c"), _q(5, "b")]
    assert [q.id for q in limit_items(questions, 3)] == ["t/q0", "t/q3", "t/q4"]
    assert [q.id for q in limit_items(questions, 5)] == ["t/q0", "t/q1", "t/q3", "t/q4", "t/q5"]
    assert limit_items(questions, None) == questions
    assert limit_items(questions, 99) == questions
    for limit in range(1, 7):  # growing the limit only ever adds questions
        smaller = {q.id for q in limit_items(questions, limit)}
        assert smaller <= {q.id for q in limit_items(questions, limit + 1)}
    for bad in (0, -1, True):
        with pytest.raises(ValueError, match="limit"):
            limit_items(questions, bad)


def test_task_stays_a_task() -> None:
    assert isinstance(load_task("synthetic", limit=2), Task)
