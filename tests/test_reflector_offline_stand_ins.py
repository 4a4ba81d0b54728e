"""The offline backend runs the reflector machinery on its stand-ins: ``search.ensemble`` makes offline
reflector kinds the arms of the same bandit that chooses among ``llm.reflector``'s models (each at a nominal
price per reflection), and ``offline-reader`` reads the run through ``llm-reader``'s own tools before the
offline reflector chooses its edit. The real search policy, steering, replay, status and tools run; only the
evaluation is the stand-in of ``test_policy``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mstar_ray.driver.resume import merge_resume_config
from mstar_ray.inspect.status import status_text
from mstar_ray.reflect.base import ReflectorSetup
from mstar_ray.reflect.ensemble import ModelEnsemble
from mstar_ray.reflect.offline.guided import OfflineReflector
from mstar_ray.reflect.offline.reader_stand_in import OfflineReadingReflector, read_cases
from mstar_ray.reflect.reflector import Child, ReflectionOutcome, answer
from mstar_ray.reflect.registry import make_reflector
from mstar_ray.reflect.request import ReflectionRequest
from mstar_ray.run_config import RunConfig
from mstar_ray.runlog.reader import read_rows
from mstar_ray.runlog.sources import load_source
from mstar_ray.search.work import Done, Finished
from mstar_ray.state.reflector_yield import model_arms, yield_lines
from mstar_ray.state.replay import restore
from tests.test_policy import InProcessPool, evaluate, make_policy, score_of
from tests.test_reflector_reads_the_run import hidden_and_visible

PRICES = {"offline": 0.01, "offline-random": 0.0001}  # nominal USD per reflection: the blind one a hundredth


class StandInPool(InProcessPool):
    """Reflections by the reflector the actor builds from the config (``make_reflector`` with search.ensemble);
    failed results attributed to the storage stage, as the attribution step would."""

    def __init__(self, config: RunConfig, run_dir: Path | None = None):
        super().__init__(evaluators=1, reflectors=1)
        setup = ReflectorSetup(config.llm, max_repairs=1, run_dir=str(run_dir) if run_dir else None)
        self.reflector = make_reflector(config.search.reflector, setup, list(config.search.ensemble or ()))

    def next_finished(self, timeout_s: float) -> list[Done]:
        work = self.running.pop(0)
        if work.kind == "evaluate":
            outcome = evaluate(work.payload, score_of)
            results = [r.model_copy(update={"stage": "storage"}) if r.score < 1 else r for r in outcome.report.results]
            return [Finished(work, outcome.model_copy(update={"report": outcome.report.model_copy(
                update={"results": results})}))]
        result, guidance = answer(self.reflector, work.payload, lambda source: None)
        return [Finished(work, ReflectionOutcome(result=result, guidance=guidance))]


def run(policy, seeds, restored=None) -> None:
    policy.observer.run_dir.write_config(policy.config)
    policy.start(seeds, restored, policy.observer.run_dir.read_program if restored else None)
    policy.drive(StandInPool(policy.config, policy.observer.run_dir.path))
    policy.observer.run_dir.close()


def started(run_dir: Path) -> list[dict]:
    return [json.loads(e.data) for e in read_rows(run_dir, "events") if e.transition == "ReflectionStarted"]


@pytest.mark.parametrize("order", [("offline", "offline-random"), ("offline-random", "offline")])
def test_the_bandit_chooses_among_offline_stand_ins_by_improvement_per_dollar(tmp_path: Path, order):
    ensemble = {kind: PRICES[kind] for kind in order}
    policy, seeds = make_policy(tmp_path, max_candidates=6, reflector=order[0], ensemble=ensemble)
    assert policy.steering.ensemble == list(order)
    run(policy, seeds)
    path = policy.observer.run_dir.path
    rows = started(path)
    counts = {kind: sum(1 for r in rows if r["model"] == kind) for kind in order}
    # each tried once, then the one a hundredth the price (every child alike: one entry, no lead, over 0.1)
    assert counts["offline"] == 1 and counts["offline-random"] >= 5, counts
    assert [r["reason"] for r in rows[:2]] == ["not tried yet", "not tried yet"]
    assert all(r["reason"].startswith("best bound on gain per dollar") for r in rows[2:])
    # each reflection went to the stand-in chosen for it: the reflective one says why it chose its edit
    by_model = {r["iteration"]: r["model"] for r in rows}
    children = [m for m in policy.state.members if m.origin.startswith("mutation:")]
    assert children and all((" (why: " in m.commit_message) == (by_model[m.iteration] == "offline") for m in children)
    # the spend is the nominal price per reflection; status shows the records rebuilt from the run directory
    arms = {a.model: a for a in model_arms(policy.state, policy.steering.spend, policy.steering.ensemble, ensemble)}
    assert {k: a.spend_usd for k, a in arms.items()} == pytest.approx({k: PRICES[k] * counts[k] for k in order})
    shown = [line for line in status_text(path).splitlines() if line.startswith("reflector ")]
    assert shown == [f"reflector {line}" for line in yield_lines([arms[k] for k in order])]
    assert all("nominal" in line for line in shown)


def test_an_offline_ensemble_is_rebuilt_on_resume_and_may_change(tmp_path: Path):
    ensemble = dict(PRICES)
    policy, seeds = make_policy(tmp_path, max_candidates=3, ensemble=ensemble)
    run(policy, seeds)
    live = model_arms(policy.state, policy.steering.spend, policy.steering.ensemble, ensemble)
    replayed = restore(policy.observer.run_dir.path)
    assert replayed.reflector_models == policy.state.reflector_models
    assert model_arms(replayed, replayed.reflector_usage, policy.steering.ensemble, ensemble) == live
    # resumed with more budget, the blind stand-in dropped and the reader added: the newcomer is tried first
    changed = {"offline": 0.01, "offline-reader": 0.001}
    given = make_policy(tmp_path / "given", max_candidates=5, ensemble=changed)[0].config
    config = merge_resume_config(policy.config, given)
    assert config.search.ensemble == changed and config.reflector_arms() == ["offline", "offline-reader"]
    resumed, _ = make_policy(tmp_path, max_candidates=5, ensemble=changed)
    run(resumed, seeds, replayed)
    after = {a.model: a for a in model_arms(resumed.state, resumed.steering.spend, resumed.steering.ensemble, changed)}
    before = {a.model: a for a in live}
    assert after["offline-random"].reflections == before["offline-random"].reflections  # reported, never chosen
    assert after["offline-reader"].reflections >= 1
    assert started(resumed.observer.run_dir.path)[len(policy.state.reflector_models)]["model"] == "offline-reader"


def test_a_single_stand_in_and_a_bad_ensemble() -> None:
    assert RunConfig().reflector_arms() == []  # search.reflector alone answers: no choice is made or logged
    for ensemble, said in [({"offline": 1.0}, "two reflector kinds or more"), ({"offline": 1, "llm": 1}, "need a model"),
                           ({"offline-random": 1, "offline-reader": 1}, "must be one of them")]:
        with pytest.raises(ValueError, match=said):
            RunConfig.model_validate({"search": {"reflector": "offline", "ensemble": ensemble}})
    made = make_reflector("offline", ReflectorSetup(RunConfig().llm, 1), ["offline", "offline-random"])
    assert isinstance(made, ModelEnsemble)
    dropped = made.reflect(ReflectionRequest(parent_id="p", parent_source="", parent_score=0.0, model="gone"), None)
    assert "search.ensemble lists offline, offline-random" in dropped.reason
    # search.reflector answers a request naming no arm (a runtime fix), wherever the ensemble lists it
    assert list(make_reflector("offline-random", ReflectorSetup(RunConfig().llm, 1), ["offline", "offline-random"])
                .members) == ["offline-random", "offline"]


@pytest.fixture(scope="module")
def attributed_run(tmp_path_factory) -> Path:
    """A finished offline search whose failures are attributed to the storage stage."""
    policy, seeds = make_policy(tmp_path_factory.mktemp("run"), max_candidates=3)
    run(policy, seeds)
    return policy.observer.run_dir.path


def bare_request(run_dir: Path) -> ReflectionRequest:
    """A request on the best program with nothing of its failures in it: what is known of them is read."""
    best = max((r for r in read_rows(run_dir, "candidates") if r.static_score is not None), key=lambda r: r.static_score)
    return ReflectionRequest(parent_id=best.id, parent_source=load_source(run_dir, best.id),
                             parent_score=best.static_score, iteration=9, seed=9)


def test_the_offline_reader_chooses_its_edit_from_the_stages_it_read_through_the_tools(attributed_run: Path):
    request = bare_request(attributed_run)
    reader = OfflineReadingReflector(run_dir=attributed_run, max_turns=6, tool_result_chars=10**6)
    child = reader.reflect(request, lambda source: None)
    names = [name for name, _ in reader.last_read]
    assert names[:2] == ["results", "list_programs"] and set(names) <= {"results", "list_programs", "diff", "read_program"}
    assert reader.last_reader.calls == len(names) <= 6
    cases = read_cases(reader.last_read[0][1])
    assert cases and {c.stage for c in cases} == {"storage"}  # read from the tool's text, as a model reads it
    assert isinstance(child, Child) and "of failures at storage" in child.commit_message
    # the offline reflector given the same request knows no stage: the reading is what chose the edit
    blind = OfflineReflector().reflect(request, lambda source: None)
    assert "storage" not in blind.commit_message
    # nothing it read shows a question that scores a program, or its answer
    hidden_ids, hidden_questions, hidden_answers = hidden_and_visible(attributed_run)
    for name, text in reader.last_read:
        for leaked in [*hidden_ids, *hidden_questions, *hidden_answers]:
            assert leaked not in text, f"{name} shows {leaked!r}"


def test_the_offline_reader_is_bounded_in_turns_and_characters(attributed_run: Path):
    request = bare_request(attributed_run)
    for bounds, calls in [({"max_turns": 2}, 2), ({"max_turns": 6, "max_read_tokens": 1}, 1)]:
        reader = OfflineReadingReflector(run_dir=attributed_run, **bounds)
        assert isinstance(reader.reflect(request, lambda source: None), Child)
        assert reader.last_reader.calls == len(reader.last_read) == calls
    cut = OfflineReadingReflector(run_dir=attributed_run, tool_result_chars=50)
    cut.reflect(request, lambda source: None)
    assert all(len(text) <= 50 + len("\n[... cut]") for _, text in cut.last_read)
    # without a run directory it is the offline reflector
    alone = make_reflector("offline-reader", ReflectorSetup(RunConfig().llm, 3))
    assert alone.run_dir is None
    assert alone.reflect(request, lambda source: None).source == OfflineReflector().reflect(request, lambda s: None).source
