"""Rubric criteria judged by an LLM through the project's real client (limits, cache, usage): verdict parsing and
HealthBench's score exactly, against a real HTTP server with scripted replies; `mstar-ray eval` with a judge; and,
marked slow, SmolLM2 on llama.cpp as task agent and judge of a real item."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.llm_backend import LLMBackend
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.families.rubric.graders import CORRECTION, STAND_IN_LABEL, JudgeGrader, read_verdict
from mstar_ray.llm.cache import MemoryCache
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig
from mstar_ray.families.task_registry import load_task
from mstar_ray.families.rubric.conversations import Criterion, RubricSpec
from tests.conftest import seed_source
from tests.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
HEALTHBENCH = ROOT / "tests" / "fixtures" / "rubric" / "healthbench.jsonl"
# A memory that always recalls one passage: the offline agent's reply is then known, whatever the item.
ONE_PASSAGE = seed_source("vector_search").replace(
    '        if self.count == 0:\n            return ""',
    '        return "Chest pain that spreads to the jaw or arm: call emergency services now."')


@pytest.mark.parametrize("reply, met", [
    ('{"explanation": "It says so.", "criteria_met": true}', True),
    ('{"criteria_met": false, "explanation": "No."}', False),
    ('Sure:\n```json\n{"criteria_met": "true"}\n```', True),
    ('{"criteria_met": "FALSE"}', False),
    ('{"criteria_met": "maybe"}', None),
    ('{"explanation": "met"}', None),
    ("The response meets the criterion.", None),
])
def test_a_verdict_is_read_or_unreadable_never_guessed(reply, met):
    assert read_verdict(reply).met is met


def client(server: ScriptedServer, cache=None) -> LLMClient:
    config = EndpointConfig(base_url=server.base_url, model="scripted", timeout_s=30, max_retries=0)
    return LLMClient(ChatEndpoint("judge", config), cache=cache)


def test_an_unreadable_reply_is_sent_back_once_with_what_was_wrong():
    criterion = Criterion(text="Mentions the glass test.", points=4)
    with ScriptedServer() as server:
        server.replies.extend(["I think so.", '{"criteria_met": true, "explanation": "It does."}', "?", "??"])
        judge = JudgeGrader(client(server))
        assert judge("User: I have a rash.", "Press a glass on it.", criterion) == (True, "It does.")
        second = judge("User: I have a rash.", "Something else.", criterion)
        assert second.met is None and second.note.startswith("unreadable (the reply holds no JSON object): '??'")
    first, retry = server.prompts[0], server.prompts[1]
    assert first[0]["content"].endswith("Criterion (+4 points): Mentions the glass test.")  # the shared part first
    assert "Conversation:\nUser: I have a rash." in first[0]["content"] and "Press a glass on it." in first[0]["content"]
    assert retry == [*first, {"role": "assistant", "content": "I think so."}, {"role": "user", "content": CORRECTION}]
    assert judge.label == "LLM judge scripted"


def two_items():
    task = load_task("healthbench", data=str(HEALTHBENCH))
    items = {i.id: i for i in task.items}
    return task.model_copy(update={"items": [items["hb-chest-4"], items["hb-stroke-4"]]})


def test_judged_criteria_score_exactly_through_a_real_evaluation():
    task = two_items()
    chest, stroke = (RubricSpec.model_validate(i.spec).criteria for i in task.items)
    assert [c.points for c in chest] == [8, 5, 4, 3, -6] and [c.points for c in stroke] == [8, 5, 3, 4, -5]
    cache = MemoryCache()
    with ScriptedServer() as server:
        server.replies.extend([
            # chest: met, not met, met, unreadable twice (left out), the negative one met
            '{"criteria_met": true}', '{"criteria_met": false}', '{"criteria_met": true}', "no idea", "still none",
            '{"criteria_met": true, "explanation": "It says to wait."}',
            # stroke: met (a string in a fence), unreadable then not met, not met, met, not met
            '```json\n{"criteria_met": "true"}\n```', "hmm", '{"criteria_met": false}', '{"criteria_met": false}',
            '{"criteria_met": true}', '{"criteria_met": false}'])
        judge = client(server, cache)
        report = evaluate(ONE_PASSAGE, task, OfflineBackend(), HashingEmbedder(), judge=judge)
        assert server.requests == 12
        # the same evaluation again: every verdict from the cache, none asked again
        again = evaluate(ONE_PASSAGE, task, OfflineBackend(), HashingEmbedder(), judge=client(server, cache))
        assert server.requests == 12 and [r.score for r in again.results] == [r.score for r in report.results]
    assert report.violation is None
    chest_result, stroke_result = report.results
    assert chest_result.prediction == "Chest pain that spreads to the jaw or arm: call emergency services now."
    assert chest_result.score == pytest.approx((8 + 4 - 6) / (8 + 5 + 4))  # the unreadable +3 is in neither sum
    assert stroke_result.score == pytest.approx((8 + 4) / (8 + 5 + 3 + 4))
    assert report.score == pytest.approx((chest_result.score + stroke_result.score) / 2)
    assert report.calls["grade"] == 10 and report.calls["grade_unreadable"] == 1
    assert report.llm["grade"].requests == 12 and again.llm["grade"].cache_hits == 12
    assert STAND_IN_LABEL not in report.metric and report.metric.startswith("rubric score")
    trace = chest_result.trace.splitlines()
    assert trace[0] == "graded by LLM judge scripted"
    assert trace[1] == f"score {chest_result.score:.3f}: 6 of 17 positive points (unclipped {chest_result.score:.3f})"
    assert trace[2] == "1 verdict(s) unreadable, left out of the score"
    assert trace[4].startswith("  NOT MET    +5: Advises against driving")  # losses first, in rubric order
    assert trace[5].startswith("  MET        -6 (to avoid): Suggests waiting") and trace[5].endswith("It says to wait.")
    assert trace[6].startswith("  UNREADABLE +3: Explains that the symptoms may be a heart attack. -- unreadable")
    assert server.prompts[0][0]["content"].endswith(f"Criterion (+8 points): {chest[0].text}")
    assert "Response to check (the assistant's next message):\nChest pain that spreads" in server.prompts[0][0]["content"]


def test_eval_with_a_judge_configured_reports_the_judge_not_the_stand_in(tmp_path):
    config = tmp_path / "llm.yaml"
    with ScriptedServer(reply='{"criteria_met": false}') as server:
        config.write_text(yaml.safe_dump({"judge": {"base_url": server.base_url, "model": "scripted", "timeout_s": 30}}))
        done = subprocess.run(
            [sys.executable, "-m", "mstar_ray.cli", "eval", "seeds/vector_search.py", "--task", "healthbench",
             "--data", str(HEALTHBENCH), "--embedder", "hashing", "--limit", "3", "--llm-config", str(config)],
            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "scored by rubric score" in done.stdout and "STAND-IN" not in done.stdout
    grade = next(line for line in done.stdout.splitlines() if line.startswith("grade "))
    assert int(grade.split()[1]) >= 15  # 3 items of 5 criteria, each a request (probe requests aside)


@pytest.mark.slow
def test_smollm2_answers_and_judges_a_real_item(llm_server):
    # One item with two of its criteria, three texts and a short reply: every step is a SmolLM2 request, and a
    # loaded 2-core machine must still run it in minutes.
    task = two_items()
    item = task.items[0]
    spec = RubricSpec.model_validate(item.spec)
    spec = spec.model_copy(update={"criteria": [spec.criteria[0], spec.criteria[-1]]})
    texts = [t for t in task.texts if t.id == "train/hb-chest-1"] + [t for t in task.texts if "chest" not in t.id][:2]
    task = task.model_copy(update={"texts": texts, "items": [item.model_copy(update={"spec": spec.model_dump()})]})
    endpoint = dict(base_url=llm_server.base_url, model=llm_server.model, timeout_s=900, max_retries=1)
    agent = LLMClient(ChatEndpoint("task", EndpointConfig(**endpoint, max_tokens=96)))  # the reply's bound
    judge = LLMClient(ChatEndpoint("judge", EndpointConfig(**endpoint)))
    report = evaluate(seed_source("vector_search"), task, LLMBackend(agent), HashingEmbedder(), judge=judge)
    assert report.violation is None, report.violation
    result = report.results[0]
    assert result.prediction.strip() and result.trace.startswith("graded by LLM judge smollm2")
    lines = [line for line in result.trace.splitlines() if line.startswith("  ")]
    assert len(lines) == 2 and all(line.split()[0] in ("MET", "NOT", "UNREADABLE") for line in lines)
    assert 0.0 <= result.score <= 1.0
    assert report.calls["grade"] == 2 and report.llm["grade"].requests >= 2 and report.llm["respond"].requests == 1
    assert 0 < report.llm["respond"].completion_tokens <= 96 and report.llm["grade"].prompt_tokens > 0
