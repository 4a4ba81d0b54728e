"""Evolving reflector instructions (``search.guidance``): each reflection draws an instruction, its children's
results score it, and a meta-step rewrites the worst from the best; logged, and rebuilt on a resume.

A scripted model whose reply depends on the instruction it is given (it improves the program only when told
to make a targeted change) makes the instructions differ in quality; the offline reflector runs the same
machinery with the offline stand-in meta-step."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from pathlib import Path

from mstar_ray.reflect.guidance import SEED_GUIDANCE, guidance_id, read_rewrite
from mstar_ray.reflect.offline.guided import OfflineReflector
from mstar_ray.reflect.prompt import reflection_messages
from mstar_ray.reflect.reflector import ReflectionOutcome, answer
from mstar_ray.reflect.request import ReflectionRequest
from mstar_ray.runlog.reader import read_rows
from mstar_ray.search.work import Done, Finished
from mstar_ray.state.replay import restore
from tests.conftest import SEEDS
from tests.scripted_server import ScriptedServer
from tests.test_policy import InProcessPool, make_policy
from tests.test_reflector_ensemble import EnsemblePool, idle_model, improving_model, score_of

GOOD_WORDS = "targeted change"


def guided_model():
    """Improves the program only when its instruction asks for a targeted change; as the meta-step, writes an
    instruction that keeps those words (numbered, so each rewrite is new)."""
    improve, rewrites = improving_model(), itertools.count(1)

    def reply(messages: list[dict]) -> str:
        if messages[0]["content"].startswith("You improve the instruction"):
            return f"Make one targeted change where most failures went wrong (variant {next(rewrites)})."
        asked = messages[1]["content"]
        return improve(messages) if GOOD_WORDS in asked else idle_model(messages)
    return reply


def guided_policy(tmp_path: Path, server: ScriptedServer, max_candidates: int):
    endpoint = {"base_url": server.base_url, "model": "scripted", "edit_format": "file", "timeout_s": 10,
                "max_retries": 0, "max_tokens": 4000}
    return make_policy(tmp_path, max_candidates=max_candidates, reflector="llm", llm={"reflector": endpoint},
                       guidance={"size": 4, "rewrite_every": 4, "exploration": 0.5})


def test_the_prompt_carries_the_drawn_instruction_and_the_fixed_one_without_it() -> None:
    request = ReflectionRequest(parent_id="p", parent_source=(SEEDS / "vector_search.py").read_text(), parent_score=0.3)
    assert SEED_GUIDANCE[0] in reflection_messages(request)[1]["content"]
    request.guidance = SEED_GUIDANCE[2]
    content = reflection_messages(request)[1]["content"]
    assert SEED_GUIDANCE[2] in content and SEED_GUIDANCE[0] not in content


def test_the_worst_instruction_is_rewritten_from_the_best_and_the_new_one_does_better(tmp_path: Path) -> None:
    with ScriptedServer(reply_for=guided_model()) as server:
        policy, seeds = guided_policy(tmp_path, server, max_candidates=10)
        policy.start(seeds, None)
        policy.drive(EnsemblePool(policy.config.llm))
        policy.observer.run_dir.close()
    state = policy.state
    assert state.guidance_rewrites, "no meta-step was made"
    good = guidance_id(SEED_GUIDANCE[1])  # the one starting text with the words the model heeds
    texts = policy.steering.texts(state)
    assert good in texts  # the best is never the one replaced
    for rewrite in state.guidance_rewrites:
        assert rewrite.replaced != good and GOOD_WORDS in rewrite.text
    # the rewritten instructions were drawn and their children entered the population
    new_ids = {r.by for r in state.guidance_rewrites}
    drawn_new = [it for it, gid in state.guidance_of.items() if gid in new_ids]
    assert drawn_new and any(m.iteration in drawn_new for m in state.members)
    # the meta-step went to the model, logged as its own step
    assert any(c.step == "guidance" for c in read_rows(policy.observer.run_dir.path, "llm_calls"))
    # every draw and rewrite is in the events, and a replay rebuilds the population of instructions
    replayed = restore(policy.observer.run_dir.path)
    assert replayed.guidance_of == state.guidance_of and replayed.guidance_rewrites == state.guidance_rewrites
    assert policy.steering.texts(replayed) == texts
    events = [e for e in read_rows(policy.observer.run_dir.path, "events") if e.transition == "GuidanceRewritten"]
    assert [json.loads(e.data)["by"] for e in events] == [r.by for r in state.guidance_rewrites]


def test_a_resume_keeps_the_evolved_instructions(tmp_path: Path) -> None:
    with ScriptedServer(reply_for=guided_model()) as server:
        policy, seeds = guided_policy(tmp_path, server, max_candidates=8)
        policy.start(seeds, None)
        policy.drive(EnsemblePool(policy.config.llm))
        policy.observer.run_dir.close()
        before = policy.steering.texts(policy.state)
        assert set(before) != {guidance_id(t) for t in SEED_GUIDANCE}
        replayed = restore(policy.observer.run_dir.path)
        resumed, _ = guided_policy(tmp_path, server, max_candidates=12)
        resumed.start(seeds, replayed, resumed.observer.run_dir.read_program)
        assert resumed.steering.texts(resumed.state) == before
        prompts_before = len(server.prompts)
        resumed.drive(EnsemblePool(resumed.config.llm))
        resumed.observer.run_dir.close()
    # the resumed reflections were asked with the evolved texts, not the starting ones
    asked = [p[1]["content"] for p in server.prompts[prompts_before:] 
             if not p[0]["content"].startswith("You improve the instruction")]
    evolved = [t for k, t in before.items() if k not in {guidance_id(s) for s in SEED_GUIDANCE}]
    assert any(text in content for text in evolved for content in asked)


class OfflinePool(InProcessPool):
    """The offline reflector itself answers the reflections (its stand-in meta-step too)."""

    def __init__(self) -> None:
        super().__init__(evaluators=1, reflectors=1, score_of=hashed_score)
        self.reflector = OfflineReflector(max_repairs=2)

    def next_finished(self, timeout_s: float) -> list[Done]:
        if self.running[0].kind != "reflect":
            return super().next_finished(timeout_s)
        work = self.running.pop(0)
        result, guidance = answer(self.reflector, work.payload, lambda source: None)  # the sandbox is not under test
        return [Finished(work, ReflectionOutcome(result=result, guidance=guidance))]


def hashed_score(source: str, question: str = "") -> float:
    """A stand-in fitness that differs between programs, so that instructions get different records."""
    return 0.1 + int(hashlib.sha1(source.encode()).hexdigest()[:4], 16) / 65536 * 0.5


def test_with_the_offline_reflector_the_stand_in_rewrites_the_worst(tmp_path: Path) -> None:
    policy, seeds = make_policy(tmp_path, max_candidates=12, guidance={"size": 3, "rewrite_every": 4})
    policy.start(seeds, None)
    policy.drive(OfflinePool())
    policy.observer.run_dir.close()
    rewrites = policy.state.guidance_rewrites
    assert rewrites
    first = rewrites[0]
    starting = {guidance_id(t): t for t in SEED_GUIDANCE[:3]}
    best = next(t for t in starting.values() if first.text.startswith(t))  # the best text, a phrase added
    assert first.replaced in starting and first.replaced != guidance_id(best)
    assert restore(policy.observer.run_dir.path).guidance_rewrites == rewrites


def test_reading_a_models_rewrite() -> None:
    assert read_rewrite("New instruction: Do  this\nand that.") == "Do this and that."
    assert read_rewrite("```\n\n```") is None
    assert len(read_rewrite("x" * 5000)) == 600
    assert re.search(r"\(variant 1\)", guided_model()([{"role": "system", "content": "You improve the instruction"}]))
