"""An ensemble of reflector models (``llm.reflector`` lists several): each reflection's model is chosen by a
bandit on the improvement its children bring per dollar (``mstar_ray.reflect.ensemble``).

Two scripted OpenAI-compatible servers play models of different quality and price: the real one-shot
reflector asks them through the real client, gateway and ledger (which prices every call), and the real
search policy chooses between them; only the evaluation is a stand-in (the score counts what the good model
adds), as in ``test_policy``. The choice is logged per reflection, rebuilt from the logs and survives a
resume that changes the list."""

from __future__ import annotations

import itertools
import json
import random
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from mstar_ray.actors.wiring import RoleClients
from mstar_ray.config_file import ConfigError
from mstar_ray.driver.resume import merge_resume_config
from mstar_ray.inspect.status import status_text
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.reflect.base import ReflectorSetup
from mstar_ray.reflect.ensemble import ENTRY_CREDIT, Arm, choose
from mstar_ray.reflect.one_shot import ModelEnsemble
from mstar_ray.reflect.reflector import ReflectionOutcome, answer
from mstar_ray.reflect.registry import make_reflector
from mstar_ray.run_config import RunConfig
from mstar_ray.runlog.reader import read_rows
from mstar_ray.search.work import Done, Finished
from mstar_ray.state.reflector_yield import model_arms, yield_lines
from mstar_ray.state.replay import restore
from tests.scripted_server import ScriptedServer
from tests.test_policy import InProcessPool, make_policy

PROGRAM = re.compile(r"```python\n(.*?class KnowledgeBase.*?)\n```", re.DOTALL)
MARK = "Be precise"
PRICES = {"good-cheap": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
          "poor-dear": {"input_per_mtok": 10.0, "output_per_mtok": 20.0},
          "newcomer": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}


def score_of(source: str, question: str = "") -> float:
    """The stand-in fitness: each of the good model's sentences is worth a little."""
    return min(1.0, 0.2 + 0.05 * source.count(MARK))


def improving_model():
    """Adds a numbered sentence to the parent's response instruction: a new, better child every time."""
    counter = itertools.count(1)

    def reply(messages: list[dict]) -> str:
        parent = PROGRAM.search(messages[1]["content"]).group(1)
        # a sentence before the first literal of the constant (a literal or a parenthesised run of them)
        child = re.sub(r'^INSTRUCTION_RESPONSE = (\(\s*)?', lambda m: f'{m.group(0)}"{MARK} ({next(counter)}). " ',
                       parent, count=1, flags=re.MULTILINE)
        return f"COMMIT_MESSAGE: ask for precise answers\n```python\n{child}\n```"
    return reply


def idle_model(messages: list[dict]) -> str:
    """Gives the parent back unchanged: every attempt fails its check, and the reflection is discarded."""
    parent = PROGRAM.search(messages[1]["content"]).group(1)
    return f"COMMIT_MESSAGE: no change\n```python\n{parent}\n```"


def endpoint(server: ScriptedServer, model: str) -> dict:
    return {"base_url": server.base_url, "model": model, "edit_format": "file", "timeout_s": 10, "max_retries": 0,
            "max_tokens": 4000}


class EnsemblePool(InProcessPool):
    """Reflections run by the real reflector built from the run's llm settings (scripted servers behind it)."""

    def __init__(self, settings: LLMSettings):
        super().__init__(evaluators=1, reflectors=1, score_of=score_of)
        self.roles = RoleClients(settings)
        self.reflector = make_reflector("llm", ReflectorSetup(settings, max_repairs=1, client=self.roles.client))

    def next_finished(self, timeout_s: float) -> list[Done]:
        if self.running[0].kind != "reflect":
            return super().next_finished(timeout_s)
        work = self.running.pop(0)
        self.roles.drain_calls()
        # the sandboxed smoke test is not what is under test here (tests/test_reflect_pipeline runs it)
        result, guidance = answer(self.reflector, work.payload, lambda source: None)
        return [Finished(work, ReflectionOutcome(result=result, calls=self.roles.drain_calls(), guidance=guidance))]


def ensemble_policy(tmp_path: Path, endpoints: list[dict], max_candidates: int):
    policy, seeds = make_policy(tmp_path, max_candidates=max_candidates, reflector="llm",
                                llm={"reflector": endpoints, "prices": PRICES})
    assert policy.steering.ensemble == [e["model"] for e in endpoints]
    return policy, seeds, policy.config.llm


def reflections_by_model(run_dir: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in read_rows(run_dir, "events"):
        if event.transition == "ReflectionStarted":
            model = json.loads(event.data).get("model")
            counts[model] = counts.get(model, 0) + 1
    return counts


@pytest.mark.parametrize("order", [("good-cheap", "poor-dear"), ("poor-dear", "good-cheap")])
def test_the_bandit_moves_the_reflections_to_the_model_that_improves_more_per_dollar(tmp_path: Path, order):
    with ScriptedServer(reply_for=improving_model()) as good, ScriptedServer(reply_for=idle_model) as poor:
        servers = {"good-cheap": good, "poor-dear": poor}
        policy, seeds, settings = ensemble_policy(tmp_path, [endpoint(servers[m], m) for m in order], max_candidates=8)
        policy.observer.run_dir.write_config(policy.config)
        policy.start(seeds, None)
        policy.drive(EnsemblePool(settings))
        policy.stopped()
        policy.observer.run_dir.close()
    counts = reflections_by_model(policy.observer.run_dir.path)
    assert counts["poor-dear"] <= 2 < 8 <= counts["good-cheap"], counts  # each tried, then the better per dollar
    arms = {a.model: a for a in model_arms(policy.state, policy.steering.spend, policy.steering.ensemble)}
    good_arm, poor_arm = arms["good-cheap"], arms["poor-dear"]
    assert good_arm.entered == good_arm.judged and good_arm.lead > 0 and poor_arm.entered == 0
    # each of the idle model's reflections made two calls (a repair) at ten times the price
    assert poor_arm.spend_usd / poor_arm.reflections > 10 * good_arm.spend_usd / good_arm.reflections
    assert poor.requests == 2 * counts["poor-dear"] and good.requests == counts["good-cheap"]
    # the reason is logged with every choice
    reasons = [json.loads(e.data)["reason"] for e in read_rows(policy.observer.run_dir.path, "events")
               if e.transition == "ReflectionStarted"]
    assert reasons[:2] == ["not tried yet", "not tried yet"]
    assert all(r.startswith("best bound on gain per dollar") for r in reasons[2:])
    # status shows the same records, rebuilt from the run directory
    shown = [line for line in status_text(policy.observer.run_dir.path).splitlines() if line.startswith("reflector ")]
    assert shown == [f"reflector {line}" for line in yield_lines([arms[m] for m in order])]
    print("\n".join(shown))


def test_the_records_rebuilt_from_the_logs_are_the_live_ones_and_a_resume_may_change_the_list(tmp_path: Path):
    with ScriptedServer(reply_for=improving_model()) as good, ScriptedServer(reply_for=idle_model) as poor:
        policy, seeds, settings = ensemble_policy(
            tmp_path, [endpoint(good, "good-cheap"), endpoint(poor, "poor-dear")], max_candidates=4)
        policy.start(seeds, None)
        policy.drive(EnsemblePool(settings))
        policy.observer.run_dir.close()
        live = model_arms(policy.state, policy.steering.spend, policy.steering.ensemble)
        replayed = restore(policy.observer.run_dir.path)
        assert replayed.reflector_models == policy.state.reflector_models
        assert model_arms(replayed, replayed.reflector_usage, policy.steering.ensemble) == live
        # resumed with a larger budget, the idle model dropped and a new one added: no crash, the newcomer is
        # tried first, and the dropped model's record is still reported but never chosen again
        with ScriptedServer(reply_for=improving_model()) as newcomer:
            resumed, _, settings = ensemble_policy(
                tmp_path, [endpoint(good, "good-cheap"), endpoint(newcomer, "newcomer")], max_candidates=7)
            resumed.start(seeds, replayed, resumed.observer.run_dir.read_program)
            resumed.drive(EnsemblePool(settings))
            resumed.observer.run_dir.close()
    after = {a.model: a for a in model_arms(resumed.state, resumed.steering.spend, resumed.steering.ensemble)}
    before = {a.model: a for a in live}
    assert after["poor-dear"] == before["poor-dear"]
    assert after["newcomer"].reflections >= 1 and newcomer.requests >= 1
    # the kept model's record is carried over (the newcomer, as good and as cheap but less known, is explored)
    assert after["good-cheap"].reflections >= before["good-cheap"].reflections > 0
    assert after["good-cheap"].spend_usd >= before["good-cheap"].spend_usd > 0
    assert sum(a.entered for a in after.values()) == 7 and sum(a.entered for a in before.values()) == 4


def test_choose_tries_each_model_then_weighs_gain_against_cost() -> None:
    rng = random.Random(0)
    fresh = [Arm(model="a", reflections=3, judged=3, entered=3, lead=0.1, spend_usd=0.03), Arm(model="b")]
    assert choose(fresh, rng).model == "b" and choose(fresh, rng).reason == "not tried yet"
    # the same gain for a tenth of the price wins; with the prices swapped, the other model does
    cheap = Arm(model="a", reflections=5, judged=5, entered=5, lead=0.2, spend_usd=0.05)
    dear = Arm(model="b", reflections=5, judged=5, entered=5, lead=0.2, spend_usd=0.5)
    assert choose([cheap, dear], rng).model == "a" and choose([dear, cheap], rng).model == "a"
    # over many reflections, twice the gain does not pay for ten times the price, fifteen times does
    cheap = Arm(model="a", reflections=50, judged=50, entered=50, lead=2.0, spend_usd=0.5)
    dear = Arm(model="b", reflections=50, judged=50, entered=50, lead=4.0, spend_usd=5.0)
    assert choose([cheap, dear], rng, exploration=0).model == "a"
    assert choose([cheap, dear.model_copy(update={"lead": 30.0})], rng, exploration=0).model == "b"
    # exploration: a model judged once, at the same price, is tried again before the better-known one
    known = Arm(model="a", reflections=50, judged=50, entered=50, lead=0.5, spend_usd=0.5)
    once = Arm(model="b", reflections=1, judged=1, entered=1, lead=0.0, spend_usd=0.01)
    assert choose([known, once], rng, exploration=0).model == "a"
    assert choose([known, once], rng, exploration=1.0).model == "b"
    assert Arm(model="x", entered=2, lead=0.1).gain == pytest.approx(0.1 + 2 * ENTRY_CREDIT)


def test_a_single_reflector_still_configures_as_before_and_an_ensemble_must_be_priced() -> None:
    one = LLMSettings.model_validate({"reflector": {"base_url": "http://x/v1", "model": "m"}})
    assert [c.model for c in one.reflectors()] == ["m"] and list(one.endpoints()) == ["reflector"]
    two = LLMSettings.model_validate({"reflector": [{"base_url": "http://x/v1", "model": "a"},
                                                    {"base_url": "http://y/v1", "model": "b"}],
                                      "prices": {"a": {}, "b": {}}})
    assert list(two.endpoints()) == ["reflector", "reflector:b"]
    timed = two.with_endpoints({"reflector:b": two.reflectors()[1].model_copy(update={"timeout_s": 5.0})})
    assert [c.timeout_s for c in timed.reflectors()] == [None, 5.0]
    with pytest.raises(ValidationError, match="prices has no entry for b"):
        LLMSettings.model_validate({"reflector": [{"base_url": "http://x/v1", "model": "a"},
                                                  {"base_url": "http://y/v1", "model": "b"}], "prices": {"a": {}}})
    with pytest.raises(ValidationError, match="a model name of its own"):
        LLMSettings.model_validate({"reflector": [{"base_url": "http://x/v1", "model": "a"},
                                                  {"base_url": "http://y/v1", "model": "a"}], "prices": {"a": {}}})
    ensemble = make_reflector("llm", ReflectorSetup(two, max_repairs=0, client=RoleClients(two).client))
    assert isinstance(ensemble, ModelEnsemble) and list(ensemble.members) == ["a", "b"]


def test_a_resume_may_change_the_reflector_models_and_nothing_else_beside_the_budget() -> None:
    def config(models: list[str], **search) -> RunConfig:
        return RunConfig.model_validate({
            "search": {"reflector": "llm", **search},
            "llm": {"reflector": [{"base_url": f"http://{m}/v1", "model": m} for m in models],
                    "prices": {m: {} for m in models}}})
    merged = merge_resume_config(config(["a", "b"]), config(["a", "c"], max_candidates=50))
    assert [c.model for c in merged.llm.reflectors()] == ["a", "c"] and merged.search.max_candidates == 50
    with pytest.raises(ConfigError, match="search.tau"):
        merge_resume_config(config(["a", "b"]), config(["a", "c"], tau=0.5))
