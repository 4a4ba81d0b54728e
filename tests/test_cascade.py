"""Cascade evaluation (search.cascade) in the Ray-free policy, driven by the in-process pool of
``tests/test_policy.py``: every program is screened on the slice first; a child that cannot be worth it is
screened out (logged with its slice score, its parent told why, never in the population); the others are
then evaluated fully, and their static scores are those of the full evaluation alone."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from mstar_ray.config_file import ConfigError
from mstar_ray.run_config import RunConfig, load_run_config
from mstar_ray.runlog.reader import read_rows
from mstar_ray.search.cascade import ParentMargin, PopulationQuantile, cascade_rule, passes
from mstar_ray.search.jobs import EvalJob
from mstar_ray.state.replay import _from_row, restore
from mstar_ray.state.transitions import Screened
from tests.test_policy import InProcessPool, make_policy, run_until, score_of

CASCADE = {"slice_size": 3, "rule": "parent", "margin": 0.05}


def uneven(source: str, question: str) -> float:
    """The stand-in fitness, but the child of iteration 2 loses 0.3 everywhere, and every program scores 0.2
    more on some questions than on others (so a slice's mean is not the static mean)."""
    bonus = 0.2 * (zlib.crc32(question.encode()) % 2)
    return max(0.0, score_of(source) + bonus - (0.3 if "STEP_2 =" in source else 0.0))


def cascaded(tmp_path: Path, **cascade):
    return make_policy(tmp_path, max_candidates=4, seeds=("vector_search",), cascade={**CASCADE, **cascade})


def test_a_child_below_its_parents_slice_score_is_screened_out_and_the_others_are_scored_fully(tmp_path: Path):
    policy, seeds = cascaded(tmp_path)
    split = policy.plan.split
    assert len(split.screen) == 3 and set(split.screen) < set(split.static) and split.screen_texts
    pool = InProcessPool(evaluators=1, reflectors=1, score_of=uneven)
    policy.start(seeds, None)
    policy.drive(pool)
    state = policy.state
    purposes = [(job.candidate_id, job.purpose) for job in pool.jobs]
    # every program is screened first; the one screened out is never evaluated fully
    screened_out = [m for m, purpose in purposes if purpose == "screen" and (m, "search") not in purposes]
    assert len(screened_out) == 1 and state.screened_out == 1 and state.evaluated == 4
    assert all(purposes[i + 1] == (m, "search") for i, (m, purpose) in enumerate(purposes)
               if purpose == "screen" and m not in screened_out)
    out = screened_out[0]
    assert out not in state.population and out not in state.pending
    parent = next(j for j in pool.jobs if j.candidate_id == out).source
    # the parent's history says why
    note = next(n for notes in state.child_notes.values() for n in notes if n.id == out)
    assert note.score is None and note.note.startswith("screened out:") and "needed to go on" in note.note
    # those that passed have the full evaluation's static score, not the slice's, nor a mixture
    for member in state.members:
        full = next(j for j in pool.jobs if j.candidate_id == member.id and j.purpose == "search")
        static = [uneven(member.source, q) for q in full.static_ids]
        assert member.score == pytest.approx(sum(static) / len(static))
        assert {r.id for r in member.results} == {q.id for q in full.items}
        assert state.screen_scores[member.id] != pytest.approx(member.score)  # the slice is another measurement
    # the log: the screened-out row with its slice score and bar, the slice's results as their own split
    policy.observer.run_dir.close()
    rows = {r.id: r for r in read_rows(policy.observer.run_dir.path, "candidates")}
    assert rows[out].status == "screened_out" and rows[out].static_score is None
    assert rows[out].screen_score == pytest.approx(state.screen_scores[out])
    bar = rows[out].screen_threshold
    assert bar is not None and rows[out].screen_score < bar
    assert all(rows[m.id].screen_score == pytest.approx(state.screen_scores[m.id]) for m in state.members)
    results = read_rows(policy.observer.run_dir.path, "results")
    assert {r.question_id for r in results if r.candidate == out} == set(split.screen)
    assert {r.split for r in results if r.candidate == out} == {"screen"}
    assert parent  # (the screened-out child had a parent to be compared with)


def test_replay_and_resume_know_who_was_screened(tmp_path: Path):
    policy, seeds = cascaded(tmp_path)
    pool = InProcessPool(evaluators=1, reflectors=1, score_of=uneven)
    policy.start(seeds, None)
    policy.drive(pool)
    policy.stopped()
    policy.observer.run_dir.close()
    live, replayed = policy.state, restore(policy.observer.run_dir.path)
    assert replayed.screen_scores == live.screen_scores and replayed.screened_out == live.screened_out == 1
    assert [(m.id, m.score) for m in replayed.members] == [(m.id, m.score) for m in live.members]
    assert {k: v for k, v in replayed.child_notes.items() if v} == {k: v for k, v in live.child_notes.items() if v}


def test_a_program_that_passed_its_screening_resumes_at_its_full_evaluation(tmp_path: Path):
    policy, seeds = cascaded(tmp_path)
    pool = InProcessPool(evaluators=1, reflectors=1, score_of=uneven)
    policy.start(seeds, None)
    # stop the "process" with the first child screened and passed, its full evaluation not yet done
    run_until(policy, pool, lambda: any(c.origin != "seed" and c.id in policy.state.screen_scores
                                        for c in policy.state.pending.values()))
    policy.observer.run_dir.close()
    state = restore(policy.observer.run_dir.path)
    child = next(c for c in state.queue if c.origin != "seed")
    assert child.id in state.screen_scores
    resumed, _ = cascaded(tmp_path)
    resumed.start(seeds, state, resumed.observer.run_dir.read_program)
    second = InProcessPool(evaluators=1, reflectors=1, score_of=uneven)
    resumed.drive(second)
    assert (second.jobs[0].candidate_id, second.jobs[0].purpose) == (child.id, "search")  # not screened again
    assert sum(1 for j in [*pool.jobs, *second.jobs] if (j.candidate_id, j.purpose) == (child.id, "screen")) == 1


def blind_to_step_3(source: str, question: str) -> float:
    """The stand-in fitness, but the agent does not act on what iteration 3 adds: its child answers every
    question as its parent does (``uneven`` keeps every slice from being all alike)."""
    return uneven(source.replace("STEP_3 =", "unread ="), question)


@pytest.mark.parametrize("rule", [{"rule": "parent"}, {"rule": "quantile", "quantile": 0.0}])
def test_a_child_that_answers_the_slice_as_its_parent_costs_the_slice_alone(tmp_path: Path, rule: dict):
    policy, seeds = cascaded(tmp_path, **rule)
    pool = InProcessPool(evaluators=1, reflectors=1, score_of=blind_to_step_3)
    policy.start(seeds, None)
    policy.drive(pool)
    state = policy.state
    (repeat,) = [j.candidate_id for j in pool.jobs if "STEP_3 =" in j.source]
    parent = next(n for n in state.child_notes if any(e.id == repeat for e in state.child_notes[n]))
    # screened once, never evaluated fully, though its slice score is its parent's, which passes either bar
    assert [j.purpose for j in pool.jobs if j.candidate_id == repeat] == ["screen"]
    assert state.screen_scores[repeat] == state.screen_scores[parent]
    assert repeat not in state.population and state.screened_out == 2  # iteration 2's child loses its bar
    note = next(e for e in state.child_notes[parent] if e.id == repeat)
    assert note.note.startswith("screened out: it gave its parent's answer to every question")
    # every child that changed an answer on the slice went on (the rule compares answers, not only scores)
    went_on = {j.candidate_id for j in pool.jobs if j.purpose == "search"}
    assert {m.id for m in state.members} == went_on
    # the log says why, and a replay, whether from the event or from the program's row alone, says the same
    policy.observer.run_dir.close()
    events = read_rows(policy.observer.run_dir.path, "events")
    assert any(e.candidate == repeat and (e.detail or "").endswith("screened out: its parent's answers") for e in events)
    replayed = restore(policy.observer.run_dir.path)
    assert replayed.child_notes[parent] == state.child_notes[parent]
    assert replayed.screen_answers == state.screen_answers and repeat not in state.screen_answers
    row = next(r for r in read_rows(policy.observer.run_dir.path, "candidates") if r.id == repeat)
    rebuilt = _from_row(row, {}, policy.observer.run_dir.path)
    assert isinstance(rebuilt, Screened) and rebuilt.repeats_parent


def test_with_the_quantile_rule_a_child_must_reach_the_populations_quantile(tmp_path: Path):
    policy, seeds = make_policy(tmp_path, max_candidates=3, cascade={"slice_size": 3, "rule": "quantile",
                                                                     "quantile": 1.0})
    pool = InProcessPool(evaluators=1, reflectors=1, score_of=uneven)
    policy.start(seeds, None)
    policy.drive(pool)
    # quantile 1.0: a child must match the best slice score so far; every child improves on it but iteration 2's
    children = [j.candidate_id for j in pool.jobs if j.purpose == "screen" and "STEP_" in j.source]
    assert len(children) == 3 and policy.state.screened_out == 1


def test_the_rules_alone():
    assert ParentMargin(0.05).bar(0.4, [0.1, 0.9]) == pytest.approx(0.35)
    assert ParentMargin(0.05).bar(None, [0.1]) is None
    assert PopulationQuantile(0.5).bar(0.9, [0.1, 0.2, 0.6]) == pytest.approx(0.2)
    assert PopulationQuantile(0.5).bar(0.9, []) is None
    assert passes(0.35, 0.35 + 1e-15) and not passes(0.34, 0.35) and passes(0.0, None)
    with pytest.raises(ValueError, match="unknown cascade rule"):
        cascade_rule("median", margin=0.0, quantile=0.5)


def test_without_a_cascade_nothing_is_screened(tmp_path: Path):
    policy, seeds = make_policy(tmp_path, max_candidates=2, seeds=("vector_search",))
    pool = InProcessPool(evaluators=1, reflectors=1)
    policy.start(seeds, None)
    policy.drive(pool)
    assert {job.purpose for job in pool.jobs} == {"search"} and not policy.plan.split.screen


@pytest.mark.parametrize("cascade, key", [
    ({"slice_size": 12}, "search.cascade.slice_size"),
    ({"slice_size": 0}, "search.cascade.slice_size"),
    ({"rule": "median"}, "search.cascade.rule"),
    ({"margin": -0.1}, "search.cascade.margin"),
    ({"quantile": 1.5}, "search.cascade.quantile"),
    ({"slice": 3}, "search.cascade.slice: unknown key; did you mean 'slice_size'?"),
])
def test_a_bad_cascade_config_names_its_key(tmp_path: Path, cascade: dict, key: str):
    path = tmp_path / "bad.yaml"
    import yaml

    path.write_text(yaml.safe_dump({"split": {"static_size": 12}, "search": {"cascade": cascade}}))
    with pytest.raises(ConfigError) as caught:
        load_run_config(path)
    assert key in str(caught.value)
    assert RunConfig.model_validate({"search": {"cascade": {"slice_size": 4}}}).search.cascade.rule == "parent"


def test_a_screening_job_is_the_slice_with_its_own_texts(tmp_path: Path):
    policy, seeds = cascaded(tmp_path)
    policy.start(seeds, None)
    (work,) = policy.next_work(1, 1)
    job: EvalJob = work.payload
    split = policy.plan.split
    assert job.purpose == "screen" and job.static_ids == split.screen and not job.feedback_ids
    assert [t.id for t in job.texts] == split.screen_texts and [q.id for q in job.items] == split.screen
