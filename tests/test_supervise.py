"""``mstar-ray supervise``: the checks that reject a plan, a question or a blind reading (each counted by its
reason), the offline path end to end on LoCoMo's texts (valid, deterministic, labelled), a model author through
a real HTTP server whose replies are scripted (a good reply kept, replies that are not JSON or cite a span
that is not there rejected and counted, every call in the accounts), bad input, and SmolLM2 for real."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mstar_ray.cli import main
from mstar_ray.llm.endpoint import EndpointConfig
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.supervise.bundles import Bundle, Piece, bundles, pieces
from mstar_ray.supervise.command import run_supervise
from mstar_ray.supervise.offline_author import LABEL
from mstar_ray.supervise.plan import read_plan, read_question, read_verdict
from mstar_ray.families.qa.jsonl import load_jsonl
from mstar_ray.tasks.model import EvidenceUnit, RawText
from tests.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.json"
FIXTURE = Path(__file__).parent / "fixtures" / "jsonl_task"

BUNDLE = Bundle((Piece("p1", "t1", "Ann: I moved to Lisbon in May.", "3 May 2024"),
                 Piece("p2", "t2", "Ann: Now I live in Porto, near my sister.", "8 August 2024")))


def plan(**fields) -> str:
    base = {"topic": "home", "facts": [{"piece": "p1", "quote": "I moved to Lisbon"}], "operation": "single",
            "answer": "Lisbon", "answer_type": "entity"}
    return json.dumps({**base, **fields})


def test_the_plan_check_rejects_what_the_bundle_does_not_hold():
    good, problem = read_plan(plan(), BUNDLE)
    assert problem is None and good.evidence == ["p1"]
    assert read_plan("I think the answer is Lisbon", BUNDLE) == (None, "plan: not JSON")
    assert read_plan(plan(facts=[{"piece": "p9", "quote": "I moved"}]), BUNDLE)[1] == "plan: cites a piece not in its bundle"
    assert read_plan(plan(facts=[{"piece": "p1", "quote": "I moved to Madrid"}]), BUNDLE)[1] == \
        "plan: a quote is not in the piece it cites"
    assert read_plan(plan(operation="update"), BUNDLE)[1] == "plan: combines facts from one piece only"
    assert read_plan(plan(answer="Porto"), BUNDLE)[1] == "plan: its answer is in none of its facts"
    assert read_plan(plan(operation="guess"), BUNDLE)[1] == "plan: malformed (operation)"
    # a date answer may be the cited piece's date; an update cites two pieces
    assert read_plan(plan(answer="3 May 2024", answer_type="date"), BUNDLE)[1] is None
    update = plan(facts=[{"piece": "p1", "quote": "moved to lisbon"}, {"piece": "p2", "quote": "I live in Porto"}],
                  operation="update", answer="Porto")
    assert read_plan(update, BUNDLE)[1] is None


def test_the_question_and_the_blind_reading_are_checked():
    checked, _ = read_plan(plan(), BUNDLE)
    assert read_question('{"question": "Where did Ann move in May?"}', checked) == ("Where did Ann move in May?", None)
    assert read_question('{"question": "Did Ann move to Lisbon?"}', checked)[1] == "question: gives its answer away"
    assert read_question('{"question": "What does p1 say, in [D1:3]?"}', checked)[1] == "question: names a piece id"
    assert read_question('{"question": "Tell me about Ann."}', checked)[1] == "question: not one short question"
    assert read_verdict('{"answerable": true, "answer": "lisbon.", "citations": ["p1"]}', checked) is None
    assert read_verdict('{"answerable": true, "answer": "Porto", "citations": ["p1"]}', checked) == \
        "verification: a different answer"
    assert read_verdict('{"answerable": true, "answer": "Lisbon", "citations": []}', checked) == \
        "verification: does not cite all its evidence"
    assert read_verdict('{"answerable": false}', checked) == "verification: not answerable from its evidence"
    assert read_verdict("Lisbon", checked) == "verification: not JSON"


def test_bundles_are_small_connected_and_seeded():
    texts = [RawText(id=f"t{i}", text=f"[{i + 1} May 2024]\nAnn: day {i} with Bo at the harbour.\nBo: word{i}",
                     units=[EvidenceUnit(id=f"t{i}:a", start=13 + (i >= 9), end=43 + (i >= 9)),
                            EvidenceUnit(id=f"t{i}:b", start=44 + (i >= 9), end=52 + 2 * (i >= 9))])
             for i in range(12)]
    assert len(pieces(texts)) == 24 and pieces(texts)[0].date == "1 May 2024"
    made = bundles(texts, 5, seed=1)
    assert len(made) == 5 and all(2 <= len(b.pieces) <= 4 for b in made)
    assert made == bundles(texts, 5, seed=1) and made != bundles(texts, 5, seed=2)


@pytest.mark.skipif(not LOCOMO.is_file(), reason="needs ../shared/data/locomo10.json")
def test_offline_supervision_of_locomo_texts_is_a_valid_deterministic_labelled_task(tmp_path, capsys):
    out = [tmp_path / "a", tmp_path / "b"]
    for folder in out:
        assert main(["supervise", "--task", "locomo", "--conversation", "1", "--data", str(LOCOMO),
                     "--out", str(folder), "--bundles", "24"]) == 0
    assert all((out[0] / f).read_text() == (out[1] / f).read_text() for f in ("texts.jsonl", "questions.jsonl"))
    report = json.loads((out[0] / "supervise.json").read_text())
    assert report["author"] == LABEL and "stand-in" in capsys.readouterr().err
    assert report["kept"] >= 8 and report["bundles"] == 24
    assert report["kept"] + sum(report["rejected"].values()) == report["bundles"]
    assert report["train"] + report["validation"] == report["kept"] and report["train"] > 0
    assert "the texts of locomo/conv-30" in report["source"]
    task = load_jsonl(out[0])
    units = {u for t in task.texts for u in (x.id for x in t.units)}
    assert all(q.evidence and set(q.evidence) <= units for q in task.items)
    assert len(task.train_ids) == report["train"] and not task.test_ids
    assert all(":" in q.category for q in task.items)  # operation:answer type
    attempts = [json.loads(line) for line in (out[0] / "attempts.jsonl").read_text().splitlines()]
    assert len(attempts) == 24 and sum(a["item"] is not None for a in attempts) == report["kept"]
    for question in task.items:  # every kept question's plan quotes its evidence word for word
        attempt = next(a for a in attempts if a["item"] == question.id)
        quote = json.loads(attempt["plan"])["facts"][0]["quote"]
        unit = next(u for t in task.texts for u in t.units if u.id == question.evidence[0])
        text = next(t for t in task.texts if any(u is unit for u in t.units))
        assert " ".join(quote.split()) in " ".join(text.text[unit.start:unit.end].split())


def test_a_model_author_through_a_real_server_keeps_good_replies_and_counts_bad_ones(tmp_path):
    filler = " We talked about the weather and the trains for a long time." * 16  # one text a bundle
    texts = [RawText(id="t1", text="[3 May 2024] Ann: I moved to Lisbon in May and I love the trams." + filler),
             RawText(id="t2", text="[8 August 2024] Ann: Now I live in Porto, near my sister Clara." + filler)]
    with ScriptedServer() as server:
        server.replies.extend([
            # bundle 1: a plan, its question, the blind reader's answer: kept
            '{"topic": "home", "facts": [{"piece": "t1", "quote": "I moved to Lisbon"}], "operation": "single",'
            ' "answer": "Lisbon", "answer_type": "entity"}',
            '{"question": "Which city did Ann move to in May?"}',
            '{"answerable": true, "answer": "Lisbon", "citations": ["t1"]}',
            # bundle 2: not JSON at all
            "Sure! Here is a plan: Ann lives in Porto.",
        ])
        server.reply = ('{"topic": "x", "facts": [{"piece": "t2", "quote": "I live in Madrid"}], "operation": "single",'
                        ' "answer": "Madrid", "answer_type": "entity"}')  # every later plan quotes what is not there
        settings = LLMSettings(task=EndpointConfig(base_url=server.base_url, model="scripted", timeout_s=10))
        seed = next(s for s in range(20) if bundles(texts, 3, s)[0].pieces[0].id == "t1")  # the scripted order
        assert run_supervise(texts, "two texts", settings, str(tmp_path / "out"), bundles=3, seed=seed,
                             train_share=0.0) == 0
    report = json.loads((tmp_path / "out" / "supervise.json").read_text())
    assert report["author"] == "llm:scripted" and report["kept"] == 1 and report["bundles"] == 2
    assert report["rejected"] == {"plan: not JSON": 1}
    assert set(report["llm_steps"]) == {"supervise_plan", "supervise_question", "supervise_verify"}
    assert report["llm_steps"]["supervise_plan"]["requests"] == 2
    [question] = load_jsonl(tmp_path / "out").items
    assert question.question == "Which city did Ann move to in May?" and question.evidence == ["t1"]


def test_a_span_that_is_not_in_its_text_is_a_counted_rejection_never_a_question(tmp_path):
    texts = [RawText(id="t1", text="Ann: I moved to Lisbon in May."), RawText(id="t2", text="Bo: I stay in Oslo.")]
    with ScriptedServer(reply='{"topic": "x", "facts": [{"piece": "t1", "quote": "I moved to Rome"}], '
                              '"operation": "single", "answer": "Rome", "answer_type": "entity"}') as server:
        settings = LLMSettings(task=EndpointConfig(base_url=server.base_url, model="scripted", timeout_s=10))
        run_supervise(texts, "two texts", settings, str(tmp_path / "out"), bundles=2, seed=0, train_share=0.5)
    report = json.loads((tmp_path / "out" / "supervise.json").read_text())
    assert report["kept"] == 0 and report["rejected"] == {"plan: a quote is not in the piece it cites": report["bundles"]}
    assert (tmp_path / "out" / "questions.jsonl").read_text() == ""


def test_a_history_with_a_text_without_an_id_is_refused_naming_the_line(tmp_path, capsys):
    folder = tmp_path / "history"
    folder.mkdir()
    shutil.copy(FIXTURE / "texts.jsonl", folder / "texts.jsonl")
    with (folder / "texts.jsonl").open("a") as handle:
        handle.write('{"text": "a text with no id"}\n')
    assert main(["supervise", "--data", str(folder), "--out", str(tmp_path / "out")]) == 2
    assert "texts.jsonl line 6: field id: Field required" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert main(["supervise", "--out", str(tmp_path / "out")]) == 2
    assert "give --task NAME" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not LOCOMO.is_file(), reason="needs ../shared/data/locomo10.json")
def test_smollm2_as_the_author_on_a_few_bundles(tmp_path, llm_server):
    from mstar_ray.families.task_registry import load_task

    texts = load_task("locomo", conversation=0, data=str(LOCOMO)).texts[:3]
    settings = LLMSettings(task=EndpointConfig(base_url=llm_server.base_url, model=llm_server.model, max_tokens=256))
    assert run_supervise(texts, "3 sessions", settings, str(tmp_path / "out"), bundles=2, seed=0, train_share=0.5) == 0
    report = json.loads((tmp_path / "out" / "supervise.json").read_text())
    assert report["author"].startswith("llm:") and report["bundles"] == 2
    assert report["kept"] + sum(report["rejected"].values()) == 2
    assert report["llm_steps"]["supervise_plan"]["requests"] >= 2  # each plan asked (a retry may add more)
    load_jsonl(tmp_path / "out") if report["kept"] else None  # whatever it kept is a valid task
