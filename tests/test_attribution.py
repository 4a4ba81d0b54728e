"""Failure attribution (MemSteer): the "reached the context" rule, each stage produced by a real program in a
real sandbox, scores that attribution never changes, a program that breaks the contract in an oracle read,
the hand-checked accuracy of the rule, and the stratified sampling of failure cases."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from mstar_ray.agent.attribution import reached
from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.reflect.prompt import reflection_messages
from mstar_ray.reflect.request import ReflectionRequest, _weighted, sample_cases
from mstar_ray.results import ItemResult
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from mstar_ray.tasks.model import EvidenceUnit, Item, RawText, Task

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.json"


def test_reached_takes_whole_words_close_words_and_sentences_not_scattered_ones():
    unit = "Caroline: I went to the LGBTQ support group yesterday and it was so powerful."
    assert reached(unit, "notes\n[8 May] Caroline: I went to the LGBTQ support group yesterday and it was so powerful.")
    assert reached(unit, "Caroline went to an LGBTQ support group, powerful")  # most content words, close together
    assert not reached(unit, "Melanie painted a sunrise by the lake last year.")
    # the same words scattered over a long context, in other turns, are not the evidence
    scattered = "I went home. " + "The weather was fine and the lake was calm. " * 12 + "A support group? " + \
        "We talked about books for hours. " * 12 + "LGBTQ rights matter. " + "The cake was lovely. " * 12 + "So powerful."
    assert not reached(unit, scattered)
    long_turn = ("Jon: Thanks! I rehearsed with a small group of dancers after work. We do all kinds of dances. "
                 "Finishing up choreography to perform at a nearby festival next month. Can't wait!")
    assert reached(long_turn, "Finishing up choreography to perform at a nearby festival next month.")  # the sentence that matters
    # small talk came through, the answer's word did not: not reached
    game = "Jolene: Here's me and my partner gaming last week - it's so fun. We played the game Detroit on the console."
    kept = "Here's me and my partner gaming last week - it's so fun."
    assert reached(game, kept) and not reached(game, kept, answer="Detroit")
    assert reached(game, game, answer="Detroit")


@pytest.mark.skipif(not LOCOMO.is_file(), reason="needs ../shared/data/locomo10.json")
@pytest.mark.slow
def test_the_rule_agrees_with_the_hand_checked_sample():
    from scripts import attribution_check

    args = type("Args", (), {"conversations": "0-7", "limit": 40, "data": LOCOMO})()
    labels = json.loads((ROOT / "scripts" / "attribution_labels.json").read_text())
    scored, stale = attribution_check.agreement(labels, attribution_check.evaluations(args))
    # A verdict holds for the material it was given on: a change to a seed or to the offline backend makes
    # some labels stale, and too many stale ones mean the sample must be checked again by hand.
    assert len(labels) == 60 and len(scored) >= 45, (
        f"{stale} of 60 hand-checked labels are stale: check a new sample (scripts/attribution_check.py --sample 60)")
    assert sum(truth == decided for truth, decided in scored) >= len(scored) - 2  # 59 of 60 when checked


PROGRAM = '''
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text."
INSTRUCTION_QUERY = "Copy the question."
INSTRUCTION_RESPONSE = "Answer."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str = field(metadata={"description": "the text"})


@dataclass
class Query:
    question: str = field(metadata={"description": "the question"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.texts = []

    def write(self, item, raw_text):
        KEEP

    def read(self, query):
        READ
'''


def program(keep: str, read: str) -> str:
    return PROGRAM.replace("KEEP", keep).replace("READ", read)


EVERYTHING = program("self.texts.append(raw_text)", 'return "\\n".join(self.texts)[:3000]')
# keeps everything, but reads only the text sharing the most words with the query: a retrieval that can miss
BEST_MATCH = program("self.texts.append(raw_text)", '''words = set(query.question.lower().split())
        best = max(self.texts, key=lambda t: len(words & set(t.lower().split())), default="")
        return best[:3000]''')
NOTHING = program("pass", 'return ""')
# returns nothing for the items, then loops for ever on an oracle query (built from the evidence's words)
HANGS_ON_ORACLE = program("self.texts.append(raw_text)", '''if "marmalade" in query.question.lower():
            while True:
                pass
        return ""''')

TEXTS = [
    RawText(id="t1", text="Ann: I keep a jar of marmalade on the shelf.", units=[EvidenceUnit(id="t1", start=0, end=44)]),
    RawText(id="t2", text="Bo: My bicycle is painted bright yellow.", units=[]),
    RawText(id="t3", text="Cy: The concert was on a rainy Tuesday.", units=[]),
]
ITEMS = [
    Item(id="q1", question="What is on the shelf?", answer="a jar of marmalade", category="objects", evidence=["t1"]),
    Item(id="q2", question="What colour is the bicycle?", answer="bright yellow", category="objects", evidence=["t2"]),
    Item(id="q3", question="When was the concert?", answer="a rainy Tuesday", category="dates", evidence=["t3"]),
    Item(id="q4", question="Who likes tea?", answer="Dee", category="people", evidence=["t9"]),  # text never written
    Item(id="q5", question="What do they eat?", answer="toast", category="objects"),  # no evidence: not attributed
]
TASK = Task(name="attribution", texts=TEXTS, items=ITEMS)


def run(source: str, attribute: bool = True, **kwargs):
    return evaluate(source, TASK, OfflineBackend(), HashingEmbedder(), attribute=attribute, **kwargs)


def stages(report) -> dict[str, str | None]:
    return {r.id: r.stage for r in report.results}


def test_every_stage_from_a_real_program_and_scores_that_attribution_never_changes():
    everything = run(EVERYTHING)
    assert {r.id: r.score for r in everything.results}["q2"] > 0
    # q1..q3: the evidence reached the context; q4 cites a text this evaluation never wrote
    assert stages(everything) == {"q1": "answering" if everything.results[0].score < 1 else None,
                                  "q2": "answering" if everything.results[1].score < 1 else None,
                                  "q3": "answering" if everything.results[2].score < 1 else None,
                                  "q4": "not_written", "q5": None}
    assert everything.results[3].missing == ["t9"]
    nothing = run(NOTHING)
    assert [stages(nothing)[q] for q in ("q1", "q2", "q3", "q4")] == ["storage", "storage", "storage", "not_written"]
    assert nothing.calls["oracle_read"] == 3 and nothing.stages == {"dates": {"storage": 1},
                                                                  "objects": {"storage": 2}, "people": {"not_written": 1}}
    best_match = run(BEST_MATCH)
    found = stages(best_match)
    assert "retrieval" in found.values(), found  # held by memory, missed by the item's read, found by the oracle's
    for source in (EVERYTHING, NOTHING, BEST_MATCH):
        plain = run(source, attribute=False)
        assert [r.score for r in plain.results] == [r.score for r in run(source).results]
        assert plain.stages is None and all(r.stage is None for r in plain.results) and "oracle_read" not in plain.calls


def test_a_program_that_breaks_the_contract_in_an_oracle_read_stops_the_attribution_not_the_evaluation():
    limits = SandboxLimits(call_timeout_s=3)
    plain = run(HANGS_ON_ORACLE, attribute=False, limits=limits)
    attributed = run(HANGS_ON_ORACLE, limits=limits)
    assert attributed.violation is None and [r.score for r in attributed.results] == [r.score for r in plain.results]
    assert "broke the contract in an oracle read: [timeout]" in attributed.attribution_stopped
    assert stages(attributed)["q1"] is None  # the read that broke it attributes nothing


def _failure(i: int, stage: str | None, category: str, score: float = 0.0) -> ItemResult:
    return ItemResult(id=f"q{i}", category=category, question=f"question {i}?", expected="x", score=score,
                      stage=stage, missing=[f"u{i}"] if stage in ("retrieval", "storage") else [])


def test_failure_cases_are_stratified_by_stage_and_category_and_draw_as_many_random_numbers():
    results = ([_failure(i, "retrieval", "temporal") for i in range(8)] + [_failure(10, "storage", "temporal")]
               + [_failure(20, "answering", "multi-hop")] + [_failure(30, None, "multi-hop", score=1.0)])
    rng = random.Random(3)
    failures, success = sample_cases(results, rng, evidence={f"u{i}": f"evidence {i}" for i in range(40)})
    assert {(f.stage, f.question) for f in failures} >= {("storage", "question 10?"), ("answering", "question 20?")}
    assert len(failures) == 3 and sum(f.stage == "retrieval" for f in failures) == 1
    assert next(f for f in failures if f.stage == "storage").missing_evidence == ["evidence 10"]
    # as many draws as the weighted sampling: the rest of the run's random choices are unchanged
    weighted = random.Random(3)
    _weighted([r for r in results if r.score < 1], weighted, 3)
    assert rng.random() == weighted.random()
    assert success is not None and success.question == "question 30?"


def test_the_prompt_gives_the_stage_counts_and_each_case_with_its_stage_and_missing_evidence():
    results = [_failure(1, "retrieval", "temporal"), _failure(2, "storage", "temporal"), _failure(3, "answering", "x")]
    failures, _ = sample_cases(results, random.Random(0), evidence={"u1": "Ann moved to Lisbon in May."})
    request = ReflectionRequest(parent_id="p", parent_source="x = 1\n", parent_score=0.1, failures=failures,
                                stage_counts={"answering": 1, "retrieval": 1, "storage": 1})
    prompt = reflection_messages(request)[1]["content"]
    assert "Where the memory failed, for the 3 failed items whose evidence is known" in prompt
    assert "- retrieval: 1 (the memory holds the evidence" in prompt and "(failed at storage)" in prompt
    assert "evidence missing from read()'s output: Ann moved to Lisbon in May." in prompt
