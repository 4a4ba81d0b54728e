from __future__ import annotations

from mstar_ray.llm.structured import conform, fallback, parse_json_object
from mstar_ray.program_schema import FieldSpec

FIELDS = [
    FieldSpec(name="speaker", type="str"),
    FieldSpec(name="count", type="int"),
    FieldSpec(name="tags", type="list[str]", has_default=True),
    FieldSpec(name="when", type="str", optional=True),
]


def test_json_is_found_inside_prose_and_fences():
    assert parse_json_object('Sure! ```json\n{"a": 1}\n``` done')[0] == {"a": 1}
    assert parse_json_object('The object is {"a": {"b": 2}} as asked')[0] == {"a": {"b": 2}}
    assert parse_json_object("[1, 2] then {bad json} and {\"ok\": true}")[0] == {"ok": True}
    obj, problem = parse_json_object("no json here")
    assert obj is None and "no JSON object" in problem


def test_conform_converts_the_unambiguous_and_reports_the_rest():
    out, errors = conform({"speaker": "Alice", "count": "3", "tags": "pets", "extra": 1}, FIELDS)
    assert out == {"speaker": "Alice", "count": 3, "tags": ["pets"], "when": None}
    assert errors == []
    out, errors = conform({"count": "many", "tags": [1, "x"]}, FIELDS)
    assert any(e.startswith("speaker: missing") for e in errors)
    assert any(e.startswith("count: expected int") for e in errors)
    assert "tags[0]" not in " ".join(errors)  # a number in a list of strings is converted


def test_fallback_always_builds_the_schema():
    out = fallback(FIELDS, "raw text")
    assert out == {"speaker": "raw text", "count": 0, "when": None}
