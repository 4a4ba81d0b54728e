"""The offline task agent: schema filling, query building, answer spans (the qa family's answer step, performed
by the offline agent), toolkit calls, determinism."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mstar_ray.agent.backend import AgentBackend
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.families.qa import ANSWER
from mstar_ray.families.qa.offline import IDK
from mstar_ray.families.rubric import RESPOND
from mstar_ray.families.step import Shown
from mstar_ray.program_schema import FieldSpec
from mstar_ray.families.rubric.conversations import Message

from mstar_ray.families.qa.scoring import token_f1

ROOT = Path(__file__).resolve().parents[1]
LOCOMO_LINE = "[1:56 pm on 8 May, 2023] Caroline: I went to a LGBTQ support group yesterday and it was so powerful."
PUPPY_LINE = "[14 March 2023] Alice: We finally adopted a puppy, his name is Biscuit!"


def F(name: str, type_: str, optional: bool = False, has_default: bool = False, description: str = "") -> FieldSpec:
    return FieldSpec(name=name, type=type_, optional=optional, has_default=has_default, description=description)


def _type_ok(spec: FieldSpec, value: Any) -> bool:
    """Whether ``value`` is a JSON value of the field's declared type (None only when optional)."""
    if value is None:
        return spec.optional
    base = spec.base
    if base == "str":
        return isinstance(value, str)
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "float":
        return isinstance(value, float)
    if base == "bool":
        return isinstance(value, bool)
    if base == "list":
        item = FieldSpec(name="item", type=spec.item_type or "any")
        return isinstance(value, list) and all(_type_ok(item, v) for v in value)
    if base == "dict":
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    return True


def _dataclass_for(fields: list[FieldSpec]) -> type:
    """A stand-in for the program's ``KnowledgeItem``: required fields first, as Python demands."""
    required = [(f.name, Any) for f in fields if not f.has_default]
    defaulted = [(f.name, Any, dataclasses.field(default=None)) for f in fields if f.has_default]
    return dataclasses.make_dataclass("KnowledgeItem", [*required, *defaulted])


SCHEMAS: dict[str, list[FieldSpec]] = {
    "content-only": [F("content", "str")],
    "speaker-date-summary": [F("speaker", "str"), F("date", "str"), F("summary", "str"), F("keywords", "list[str]")],
    "mixed-types": [
        F("facts", "list[str]"),
        F("people", "list[str]"),
        F("importance", "int"),
        F("score", "float"),
        F("is_question", "bool"),
        F("meta", "dict[str, str]"),
        F("counts", "dict[str, int]"),
        F("numbers", "list[int]"),
    ],
    "optional-and-defaults": [
        F("lesson", "str"),
        F("topic", "str", optional=True),
        F("location", "str", optional=True),
        F("when", "str", optional=True, has_default=True),
        F("payload", "any"),
        F("year", "int", has_default=True),
        F("tags", "list[str]", optional=True, has_default=True),
    ],
    "odd-names": [F("x", "str"), F("eventDate", "str"), F("whoSaid", "str"), F("nested", "list[dict[str, str]]")],
    "described-only": [F("a", "str", description="the date it happened"), F("b", "str", description="the speaker")],
}
TEXTS = [
    LOCOMO_LINE,
    PUPPY_LINE,
    "no header, no speaker, no numbers",
    "",
    "[2:10 pm on 8 May, 2023] Caroline: I'm a transgender woman! It took 3 years. Thanks Mel.",
]


def test_offline_backend_satisfies_the_protocol() -> None:
    backend = OfflineBackend()
    assert isinstance(backend.name, str) and backend.name == "offline"
    protocol_methods = [m for m in dir(AgentBackend) if not m.startswith("_") and m != "name"]
    assert protocol_methods and all(callable(getattr(backend, m)) for m in protocol_methods)
    assert "offline" in (OfflineBackend.__doc__ or "").lower() or "offline" in (
        sys.modules[OfflineBackend.__module__].__doc__ or ""
    ).lower()


@pytest.mark.parametrize("schema_name", sorted(SCHEMAS))
@pytest.mark.parametrize("raw_text", TEXTS)
def test_extract_item_fills_every_field_with_its_json_type(schema_name: str, raw_text: str) -> None:
    fields = SCHEMAS[schema_name]
    item = OfflineBackend().extract_item("Extract a knowledge item.", fields, raw_text)
    assert list(item) == [f.name for f in fields]
    for spec in fields:
        assert _type_ok(spec, item[spec.name]), (spec, item[spec.name])
    json.dumps(item)  # must survive the trip to the sandbox as JSON
    _dataclass_for(fields)(**item)


def test_extract_speaker_and_date_from_a_locomo_line() -> None:
    fields = SCHEMAS["speaker-date-summary"]
    item = OfflineBackend().extract_item("", fields, LOCOMO_LINE)
    assert item["speaker"] == "Caroline"
    assert item["date"] == "8 May 2023"
    # A model's summary: who did what, with "yesterday" resolved against the turn's date.
    assert item["summary"] == "[1:56 pm on 8 May, 2023] Caroline: I went to a LGBTQ support group on 7 May 2023 and it was so powerful."
    assert "LGBTQ" in item["keywords"] and "support" in item["keywords"]


def test_text_fields_keep_the_header_when_the_schema_cannot_hold_it() -> None:
    item = OfflineBackend().extract_item("", SCHEMAS["content-only"], LOCOMO_LINE)
    assert item["content"] == LOCOMO_LINE


def test_extract_typed_values() -> None:
    raw = "[2:10 pm on 8 May, 2023] Caroline: It took 3 years with Mel. I'm proud."
    item = OfflineBackend().extract_item("", SCHEMAS["mixed-types"], raw)
    # Facts keep who stated them; "I'm proud." is chatter (one content word), not a fact.
    assert item["facts"] == ["Caroline: It took 3 years with Mel."]
    assert item["people"] == ["Caroline", "Mel"]
    assert item["importance"] == 3 and item["score"] == 3.0 and item["numbers"] == [3]
    assert item["is_question"] is False
    assert item["meta"] == {"speaker": "Caroline", "date": "8 May 2023"}
    assert item["counts"] == {}


def test_optional_fields_with_nothing_found_are_none() -> None:
    item = OfflineBackend().extract_item("", SCHEMAS["optional-and-defaults"], "no header here at all")
    assert item["when"] is None and item["location"] is None
    assert item["year"] == 0
    assert item["payload"] == "no header here at all"
    filled = OfflineBackend().extract_item("", SCHEMAS["optional-and-defaults"], LOCOMO_LINE)
    assert filled["when"] == "8 May 2023" and filled["year"] == 2023
    assert "Caroline" in filled["lesson"] and filled["lesson"].count(".") <= 2


def test_roles_come_from_descriptions_when_names_say_nothing() -> None:
    item = OfflineBackend().extract_item("", SCHEMAS["described-only"], PUPPY_LINE)
    assert item == {"a": "14 March 2023", "b": "Alice"}


QUERY_FIELDS = [
    F("query", "str"),
    F("keywords", "list[str]"),
    F("terms", "str"),
    F("speaker", "str", optional=True),
    F("date", "str"),
    F("top_k", "int"),
    F("limit", "int", has_default=True),
    F("threshold", "float"),
    F("exact", "bool"),
    F("filters", "dict[str, str]"),
    F("names", "list[str]"),
]


def test_build_query_fills_each_field() -> None:
    q = "When did Caroline go to the LGBTQ support group in May 2023?"
    query = OfflineBackend().build_query("Build a query.", QUERY_FIELDS, q)
    assert list(query) == [f.name for f in QUERY_FIELDS]
    assert query["query"] == q
    assert query["keywords"] == ["caroline", "lgbtq", "support", "group", "may", "2023"]
    assert query["terms"] == "caroline lgbtq support group may 2023"
    assert query["speaker"] == "Caroline"
    assert query["date"] == "May 2023"
    assert query["top_k"] == 5 and query["limit"] == 5
    assert query["threshold"] == 0.0 and query["exact"] is False and query["filters"] == {}
    assert "Caroline" in query["names"]
    for spec in QUERY_FIELDS:
        assert _type_ok(spec, query[spec.name]), spec


def test_build_query_without_names_or_dates() -> None:
    query = OfflineBackend().build_query("", QUERY_FIELDS, "what happened at the picnic?")
    assert query["speaker"] is None
    assert query["date"] == ""
    assert query["names"] == []
    assert query["keywords"] == ["happened", "picnic"]


DISTRACTORS = [
    "[2 March 2023] Bob: I love hiking in the mountains near Denver.",
    "[5 March 2023] Carol: The new bakery downtown sells amazing croissants.",
    "[9 April 2023] Bob: My sister just started a job as a nurse in Boston.",
    "[12 April 2023] Carol: We watched a documentary about whales last night.",
    "[20 April 2023] Dave: I finished reading a novel about space travel.",
    "[1 May 2023] Carol: My car broke down again on the highway.",
    # Same people, other facts: the answerer must find the evidence, not just the name.
    "[3 April 2023] Alice: My cousin visited from Porto last weekend.",
    "[4 April 2023] Caroline: I painted a sunrise over the lake.",
    "[6 April 2023] Erin: Work has been hectic this month, so many meetings.",
    "[8 April 2023] Melanie: I love camping, it clears my head.",
    "[10 April 2023] Frank: College friends are coming over on Friday.",
]
EVIDENCE = {
    "When did Alice adopt Biscuit?": (PUPPY_LINE, "14 March 2023"),
    "What is the name of Alice's dog?": (PUPPY_LINE, "Biscuit"),
    "When did Caroline go to the LGBTQ support group?": (LOCOMO_LINE, "7 May 2023"),
    "Where does Alice live now?": ("[3 June 2023] Alice: We moved to Lisbon last month. The weather is lovely.", "Lisbon"),
    "How many kids does Erin have?": ("[5 June 2023] Erin: I have three kids and two cats.", "three"),
    "Who did Melanie go camping with?": ("[7 June 2023] Melanie: I went camping with Jon at the lake.", "Jon"),
    "What did Caroline research?": (
        "[6 June 2023] Caroline: I researched adoption agencies last week. It was a long day.",
        "adoption agencies",
    ),
    "What year did Frank graduate from college?": (
        "[2 July 2023] Frank: I graduated from college in 2019, feels like forever.",
        "2019",
    ),
}


def answer_on(backend: OfflineBackend, instruction: str, always_on: str, context: str, question: str) -> str:
    return backend.perform(ANSWER, Shown(instruction, always_on, context), question)


def _context(evidence: str | None) -> str:
    lines = list(DISTRACTORS)
    if evidence is not None:
        lines.insert(3, evidence)
    return "\n".join(lines)


def test_when_question_returns_the_date() -> None:
    answer = answer_on(OfflineBackend(), "Answer briefly.", "", _context(PUPPY_LINE), "When did Alice adopt Biscuit?")
    assert "14 March 2023" in answer


def test_name_question_returns_a_short_span() -> None:
    answer = answer_on(OfflineBackend(), "", "", _context(PUPPY_LINE), "What is the name of Alice's dog?")
    assert token_f1(answer, "Biscuit") > 0.5


def test_relative_dates_resolve_against_the_turn_header() -> None:
    answer = answer_on(OfflineBackend(),
        "", "", _context(LOCOMO_LINE), "When did Caroline go to the LGBTQ support group?"
    )
    assert answer == "7 May 2023"


@pytest.mark.parametrize("question", sorted(EVIDENCE))
def test_each_evidence_question_is_answered(question: str) -> None:
    evidence, gold = EVIDENCE[question]
    answer = answer_on(OfflineBackend(), "", "", _context(evidence), question)
    assert token_f1(answer, gold) >= 0.5, answer


def test_better_memory_scores_higher() -> None:
    backend = OfflineBackend()
    with_evidence: list[float] = []
    without: list[float] = []
    for question, (evidence, gold) in sorted(EVIDENCE.items()):
        with_evidence.append(token_f1(answer_on(backend, "", "", _context(evidence), question), gold))
        without.append(token_f1(answer_on(backend, "", "", _context(None), question), gold))
    assert all(w >= d for w, d in zip(with_evidence, without))
    assert sum(with_evidence) / len(with_evidence) - sum(without) / len(without) > 0.5


def test_always_on_text_is_used_as_context() -> None:
    answer = answer_on(OfflineBackend(), "", PUPPY_LINE, "", "What is the name of Alice's dog?")
    assert answer == "Biscuit"


def test_empty_or_unrelated_context_says_it_does_not_know() -> None:
    backend = OfflineBackend()
    assert answer_on(backend, "", "", "", "When did Alice adopt Biscuit?") == IDK
    assert answer_on(backend, "", "  \n ", "\n", "When did Alice adopt Biscuit?") == IDK
    assert answer_on(backend, "", "", "[1 May 2023] Zed: Totally unrelated words.", "Where is Biscuit?") == IDK


def test_other_questions_get_a_short_span_without_question_words() -> None:
    context = _context("[2:10 pm on 8 May, 2023] Caroline: I'm a transgender woman, and proud of it.")
    answer = answer_on(OfflineBackend(), "", "", context, "What is Caroline's gender identity?")
    assert token_f1(answer, "Transgender woman") >= 0.5
    assert "Caroline" not in answer and "[" not in answer
    assert len(answer.split()) <= 8


def test_ties_are_broken_by_context_order() -> None:
    backend = OfflineBackend()
    context = "[1 May 2023] Ann: I bought a red kite.\n[2 May 2023] Ann: I bought a blue kite."
    assert answer_on(backend, "", "", context, "When did Ann buy a kite?") == "1 May 2023"


def test_toolkit_completion_returns_related_sentences_in_order() -> None:
    material = [
        "[14 March 2023] Alice: We adopted a dog.",
        "[15 March 2023] Bob: I like tennis a lot.",
        "[16 March 2023] Alice: The dog loves the park.",
        "[17 March 2023] Carol: Taxes are due soon.",
    ]
    content = "Which memories mention the dog?\n" + "\n".join(material)
    messages = [{"role": "system", "content": "You are a helpful memory assistant."}, {"role": "user", "content": content}]
    backend = OfflineBackend()
    out = backend.toolkit_completion(messages)
    assert out.splitlines() == [material[0], material[2]]
    assert len(out) <= len(content)


def test_toolkit_completion_edge_cases() -> None:
    backend = OfflineBackend()
    assert backend.toolkit_completion([]) == ""
    assert backend.toolkit_completion([{"role": "user", "content": "   "}]) == ""
    summary = backend.toolkit_completion(
        [{"role": "user", "content": "Summarise the following.\n\nOne. Two. Three. Four. Five. Six. Seven."}]
    )
    assert summary.splitlines() == ["One.", "Two.", "Three.", "Four.", "Five."]
    # No user message: every message's content is the input.
    out = backend.toolkit_completion(
        [{"role": "system", "content": "What about tennis?"}, {"role": "assistant", "content": "Bob plays tennis.\nAnn sings."}]
    )
    assert out == "Bob plays tennis."
    for n in (1, 5, 40):
        content = "Why? " + " ".join(f"Word{i} tennis." for i in range(n))
        assert len(backend.toolkit_completion([{"role": "user", "content": content}])) <= len(content)


def test_calls_are_counted_per_step() -> None:
    backend = OfflineBackend()
    assert dict(backend.calls) == {"extract": 0, "query": 0, "toolkit": 0}
    backend.extract_item("", [F("content", "str")], PUPPY_LINE)
    backend.extract_item("", [F("content", "str")], LOCOMO_LINE)
    backend.build_query("", [F("query", "str")], "Where?")
    answer_on(backend, "", "", "", "Where?")
    backend.toolkit_completion([])
    backend.perform(RESPOND, Shown("", "", ""), [Message(role="user", content="Where?")])
    assert dict(backend.calls) == {"extract": 2, "query": 1, "answer": 1, "respond": 1, "toolkit": 1}


_DETERMINISM_SCRIPT = r"""
import json
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.families.qa import ANSWER
from mstar_ray.families.step import Shown
from mstar_ray.program_schema import FieldSpec
b = OfflineBackend()
fields = [FieldSpec(name=n, type=t, optional=o) for n, t, o in json.loads(FIELDS)]
out = {
    "items": [b.extract_item("", fields, t) for t in json.loads(TEXTS)],
    "queries": [b.build_query("", fields, q) for q in json.loads(QUESTIONS)],
    "answers": [b.perform(ANSWER, Shown("", "", CONTEXT), q) for q in json.loads(QUESTIONS)],
    "toolkit": b.toolkit_completion([{"role": "user", "content": "What about the dog?\n" + CONTEXT}]),
}
print(json.dumps(out, sort_keys=True))
"""


def test_outputs_are_identical_across_processes_and_hash_seeds() -> None:
    fields = [
        ("speaker", "str", False), ("date", "str", True), ("keywords", "list[str]", False),
        ("tags", "str", False), ("meta", "dict[str, str]", False), ("n", "int", False), ("facts", "list[str]", False),
    ]
    context = _context(PUPPY_LINE) + "\n" + LOCOMO_LINE
    prelude = (
        f"FIELDS = {json.dumps(json.dumps(fields))}\nTEXTS = {json.dumps(json.dumps(TEXTS + DISTRACTORS))}\n"
        f"QUESTIONS = {json.dumps(json.dumps(sorted(EVIDENCE) + ['What does Bob love?', 'What sells croissants?']))}\n"
        f"CONTEXT = {json.dumps(context)}\n"
    )
    outputs = []
    for seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        result = subprocess.run(
            [sys.executable, "-c", prelude + _DETERMINISM_SCRIPT], env=env, capture_output=True, text=True, check=True
        )
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["answers"]


@pytest.mark.parametrize(
    "context",
    [
        '{"speaker": "Alice", "date": "14 March 2023", "content": "We finally adopted a puppy, his name is Biscuit!"}\n'
        '{"speaker": "Bob", "date": "2 March 2023", "content": "I love hiking."}',
        "Relevant memories:\n1. (14 March 2023) Alice: We finally adopted a puppy, his name is Biscuit!\n"
        "2. (2 March 2023) Bob: I love hiking.",
        "Session 3 - 14 March 2023\nAlice: We finally adopted a puppy, his name is Biscuit!\nBob: I love hiking.",
    ],
    ids=["json-lines", "numbered-list", "session-header"],
)
def test_answers_survive_other_context_layouts(context: str) -> None:
    backend = OfflineBackend()
    assert answer_on(backend, "", "", context, "When did Alice adopt Biscuit?") == "14 March 2023"
    assert answer_on(backend, "", "", context, "What is the name of Alice's dog?") == "Biscuit"
    assert answer_on(backend, "", "", context, "What does Bob love?") == "hiking"
