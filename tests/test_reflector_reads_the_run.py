"""The reflector that reads the run (``search.reflector: llm-reader``): its read-only tools over a real run
directory, the guard that keeps the answers of the scoring questions out of every tool's answer, and the
multi-turn loop through a scripted OpenAI-compatible server's tool calls, bounded in turns and tokens."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from mstar_ray.actors.wiring import RoleClients
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.reflect.base import ReflectorSetup
from mstar_ray.reflect.reading import ReadingReflector
from mstar_ray.reflect.reflector import Child
from mstar_ray.reflect.registry import make_reflector
from mstar_ray.reflect.request import ReflectionRequest
from mstar_ray.reflect.run_reader import TOOLS, RunReader
from mstar_ray.runlog.reader import read_rows
from mstar_ray.runlog.sources import load_source
from tests.scripted_server import ScriptedServer
from tests.test_policy import InProcessPool, make_policy
from tests.test_reflector_ensemble import improving_model


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A finished search's run directory: programs, candidates, results on static and rotating questions."""
    policy, seeds = make_policy(tmp_path_factory.mktemp("run"), max_candidates=4)
    policy.start(seeds, None)
    policy.drive(InProcessPool(evaluators=1, reflectors=1))
    policy.stopped()
    policy.observer.run_dir.close()
    return policy.observer.run_dir.path


def hidden_and_visible(run_dir: Path) -> tuple[set[str], set[str], set[str]]:
    """The hidden questions' ids and texts, and the words of their answers that nothing visible also holds."""
    reader = RunReader(run_dir)
    rows = read_rows(run_dir, "results")
    hidden = [r for r in rows if r.question_id in reader.hidden]
    visible = [r for r in rows if r.question_id not in reader.hidden]
    assert hidden and visible  # the run logged both kinds
    seen = " ".join(f"{r.expected} {r.question}" for r in visible)
    answers = {r.expected for r in hidden if len(r.expected) >= 4 and r.expected not in seen}
    return {r.question_id for r in hidden}, {r.question for r in hidden if r.question not in seen}, answers


def every_call(run_dir: Path) -> list[tuple[str, dict]]:
    """Every tool, on every program, with the arguments that could reach the most."""
    ids = [r.id for r in read_rows(run_dir, "candidates") if r.status != "duplicate"]
    calls = [("list_programs", {"limit": 1000}), ("search", {"text": "e"}), ("search", {"text": "INSTRUCTION"})]
    for pid in ids:
        calls += [("read_program", {"id": pid}), ("results", {"id": pid, "failed_only": False}),
                  ("results", {"id": pid}), ("diff", {"a": ids[0], "b": pid})]
    return calls


def test_no_tool_shows_a_scoring_question_or_its_answer(run_dir: Path) -> None:
    hidden_ids, hidden_questions, hidden_answers = hidden_and_visible(run_dir)
    reader = RunReader(run_dir, max_chars=10**7)
    outputs = {f"{name}{json.dumps(args)}": reader.call(name, json.dumps(args)) for name, args in every_call(run_dir)}
    assert {name for name, _ in every_call(run_dir)} == {t["function"]["name"] for t in TOOLS}  # every tool is tried
    assert any("expected:" in text for text in outputs.values())  # the rotating questions' results are shown
    for where, text in outputs.items():
        assert not text.startswith("error"), (where, text)
        for leaked in [*hidden_ids, *hidden_questions, *hidden_answers]:
            assert leaked not in text, f"{where} shows {leaked!r}"


def test_a_bad_call_gets_an_error_text_and_answers_are_cut(run_dir: Path) -> None:
    reader = RunReader(run_dir, max_chars=200)
    assert reader.call("rm", "{}").startswith("error: no tool 'rm'")
    assert "no program 'nope'" in reader.call("read_program", '{"id": "nope"}')
    assert reader.call("read_program", "not json").startswith("error: read_program")
    assert reader.call("results", '{"wrong": 1}').startswith("error: results")
    pid = read_rows(run_dir, "candidates")[0].id
    assert reader.call("read_program", json.dumps({"id": pid})).endswith("[... cut]")


def reading_model(run_dir: Path, answer_after: int | None):
    """Calls every tool in turn (one per turn), then answers with an improved program; with ``answer_after``
    None it never stops calling tools."""
    calls = itertools.cycle(every_call(run_dir)[:6])
    improve = improving_model()

    def reply(messages: list[dict]):
        turns = sum(1 for m in messages if m["role"] == "assistant" and m.get("tool_calls"))
        if messages[-1]["role"] == "user" and messages[-1]["content"].startswith("Reading is over"):
            return improve(messages)
        if answer_after is None or turns < answer_after:
            name, args = next(calls)
            return [{"name": name, "arguments": args}]
        return "I know what to change."
    return reply


def reader_for(server: ScriptedServer, run_dir: Path, **bounds) -> ReadingReflector:
    settings = LLMSettings.model_validate({"reflector": {
        "base_url": server.base_url, "model": "reader", "edit_format": "file", "timeout_s": 10, "max_retries": 0,
        "max_tokens": 4000, **bounds}})
    made = make_reflector("llm-reader", ReflectorSetup(settings, max_repairs=1, client=RoleClients(settings).client,
                                                       run_dir=str(run_dir)))
    assert isinstance(made, ReadingReflector)
    return made


def request_on(run_dir: Path) -> ReflectionRequest:
    best = max((r for r in read_rows(run_dir, "candidates") if r.static_score is not None), key=lambda r: r.static_score)
    source = load_source(run_dir, best.id)
    return ReflectionRequest(parent_id=best.id, parent_source=source, parent_score=best.static_score, iteration=9)


def test_the_tool_calls_are_answered_and_it_ends_in_an_edit(run_dir: Path) -> None:
    hidden_ids, hidden_questions, hidden_answers = hidden_and_visible(run_dir)
    with ScriptedServer(reply_for=reading_model(run_dir, answer_after=5)) as server:
        reflector = reader_for(server, run_dir)
        child = reflector.reflect(request_on(run_dir), lambda source: None)
    assert isinstance(child, Child) and "Be precise" in child.source
    assert reflector.last_reader.calls == 5
    # each turn offered the tools; the sixth said it was ready; the answer was asked with the tools turned off
    assert server.requests == 7 and all(t == TOOLS for t in server.tools[:6])
    final = server.prompts[-1]
    answered = [m for m in final if m["role"] == "tool"]
    assert len(answered) == 5 and all(m["content"] and not m["content"].startswith("error") for m in answered)
    for message in answered:
        for leaked in [*hidden_ids, *hidden_questions, *hidden_answers]:
            assert leaked not in message["content"]


def test_reading_is_bounded_in_turns_and_tokens(run_dir: Path) -> None:
    with ScriptedServer(reply_for=reading_model(run_dir, answer_after=None)) as server:
        reflector = reader_for(server, run_dir, max_turns=3)
        assert isinstance(reflector.reflect(request_on(run_dir), lambda source: None), Child)
        assert reflector.last_reader.calls == 3 and server.requests == 4  # three reading turns, then the answer
    with ScriptedServer(reply_for=reading_model(run_dir, answer_after=None)) as server:
        reflector = reader_for(server, run_dir, max_turns=50, max_read_tokens=40)  # each turn takes 15 tokens
        assert isinstance(reflector.reflect(request_on(run_dir), lambda source: None), Child)
        assert reflector.last_reader.calls == 3 and server.requests == 4


def test_without_a_run_directory_it_answers_as_the_one_shot_reflector(run_dir: Path, tmp_path: Path) -> None:
    with ScriptedServer(reply_for=improving_model()) as server:
        reflector = reader_for(server, tmp_path / "not-here")
        child = reflector.reflect(request_on(run_dir), lambda source: None)
        assert reflector.run_dir is None and server.requests == 1 and server.tools == [None]
    assert isinstance(child, Child)
