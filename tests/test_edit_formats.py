"""The three edit formats on replies as models write them (tests/fixtures/replies), the function-format
merge rules, the per-model choice, prompts sized to a small context, and repairs that carry the failed
reply and its error."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.llm.cache import MemoryCache
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig
from mstar_ray.program_id import program_id
from mstar_ray.reflect.edit_formats import EDIT_FORMATS, instructions, read_edit, resolve_format
from mstar_ray.reflect.function_edit import EditError, merge_definitions
from mstar_ray.reflect.prompt import CHARS_PER_TOKEN, reflection_messages
from mstar_ray.reflect.one_shot import LLMReflector
from mstar_ray.reflect.reflector import Child, check_child
from mstar_ray.reflect.reply import ReplyError
from mstar_ray.reflect.request import Case, ReflectionRequest
from mstar_ray.reflect.smoke import smoke_test
from mstar_ray.reflect.v4a import PatchError
from tests.conftest import seed_source
from tests.scripted_server import ScriptedServer

PARENT = seed_source("vector_search")
FIXTURES = sorted((Path(__file__).parent / "fixtures" / "replies").glob("*.txt"))


def smoke(source: str) -> str | None:
    return smoke_test(source, HashingEmbedder())


def request(**overrides) -> ReflectionRequest:
    return ReflectionRequest(parent_id=program_id(PARENT), parent_source=PARENT, parent_score=0.3, **overrides)


def outcome(path: Path) -> tuple[str, str | None, object]:
    """(expectation line, error or None, edit or None) for one fixture read in its file's format."""
    expect, _, body = path.read_text().partition("\n")
    preferred = path.name.split("_")[0]
    try:
        edit = read_edit(PARENT, body, preferred)
    except (ReplyError, PatchError, EditError) as exc:
        return expect, str(exc), None
    return expect, check_child(PARENT, edit.source, request(), smoke), edit


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_reply_has_its_stated_outcome(path: Path) -> None:
    expect, error, edit = outcome(path)
    words = expect.removeprefix("# expect: ").split(" ", 1)
    if words[0] == "child":
        assert error is None, error
        assert edit.source != PARENT and edit.commit_message
        flags = words[1] if len(words) > 1 else ""
        assert bool(edit.tolerances) == bool(flags), edit.tolerances
        if flags:
            assert all(t.startswith(flags) for t in edit.tolerances) or flags == "tolerant", edit.tolerances
    else:
        assert words[0] == "error" and error is not None, f"expected an error, got a child: {edit and edit.source}"
        assert words[1] in error, error


def test_every_format_has_fixtures_of_both_outcomes() -> None:
    for fmt in EDIT_FORMATS:
        expectations = [p.read_text().split("\n", 1)[0] for p in FIXTURES if p.name.startswith(fmt + "_")]
        assert any("child" in e for e in expectations) and any("error" in e for e in expectations), fmt


def test_reading_records_the_format_actually_used() -> None:
    patch = (Path(__file__).parent / "fixtures" / "replies" / "function_as_v4a.txt").read_text().split("\n", 1)[1]
    assert read_edit(PARENT, patch, "function").edit_format == "v4a"
    program = f"COMMIT_MESSAGE: whole\n```python\n{PARENT.replace('TOP_K = 5', 'TOP_K = 6')}```"
    assert read_edit(PARENT, program, "file").edit_format == "file"
    assert read_edit(PARENT, program, "function").edit_format == "function"


def test_merge_keeps_untouched_text_and_replaces_by_name() -> None:
    code = 'INSTRUCTION_QUERY = "Name the people and dates."\n\ndef chunk(text, size):\n    return [text[:size]]\n'
    merged = merge_definitions(PARENT, code)
    assert merged.replaced == ["INSTRUCTION_QUERY", "chunk"] and merged.added == []
    before, after = PARENT.splitlines(), merged.source.splitlines()
    assert after[: before.index("INSTRUCTION_QUERY = " + PARENT.split("INSTRUCTION_QUERY = ")[1].splitlines()[0])] == \
        before[: before.index("INSTRUCTION_QUERY = " + PARENT.split("INSTRUCTION_QUERY = ")[1].splitlines()[0])]
    assert "class KnowledgeBase:" in merged.source and merged.source.count("def chunk(") == 1
    assert ast.parse(merged.source)


def test_merge_adds_new_pieces_where_they_are_defined_before_use() -> None:
    code = "import math\n\nLIMIT = 7\n\ndef score(doc):\n    return math.log(len(doc) + 1)\n\n" \
           "def forget(self, n):\n    self.count = max(0, self.count - n)\n"
    merged = merge_definitions(PARENT, code)
    assert merged.added == ["import math", "LIMIT", "score"] and merged.replaced == ["KnowledgeBase.forget"]
    tree = ast.parse(merged.source)
    names = [getattr(n, "name", None) or getattr(getattr(n, "targets", [None])[0], "id", None) for n in tree.body]
    assert names.index("score") < names.index("KnowledgeBase") and names.index("LIMIT") < names.index("KnowledgeItem")
    kb = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KnowledgeBase")
    assert [m.name for m in kb.body] == ["__init__", "write", "read", "forget"]


def test_a_dataclass_is_replaced_whole_and_commit_message_is_taken() -> None:
    code = ('COMMIT_MESSAGE = "store the place too"\n\n@dataclass\nclass KnowledgeItem:\n'
            '    speaker: str = ""\n    place: str = ""\n')
    merged = merge_definitions(PARENT, code)
    assert merged.commit_message == "store the place too" and merged.replaced == ["KnowledgeItem"]
    item = next(n for n in ast.parse(merged.source).body if isinstance(n, ast.ClassDef) and n.name == "KnowledgeItem")
    assert [s.target.id for s in item.body] == ["speaker", "place"] and item.decorator_list
    assert 'COMMIT_MESSAGE = "Seed' in merged.source  # metadata: the program's own line stays as it was


def test_multiline_strings_keep_their_text_when_a_method_is_moved() -> None:
    code = '    def read(self, query):\n        note = """first\nsecond"""\n        return note\n'
    merged = merge_definitions(PARENT, code)
    assert '        note = """first\nsecond"""' in merged.source
    namespace: dict = {}
    exec(compile(merged.source, "program", "exec"), namespace)  # the merged program is valid and complete
    assert namespace["KnowledgeBase"].read(None, None) == "first\nsecond"


def test_a_method_without_a_class_is_an_error() -> None:
    with pytest.raises(EditError, match="no class"):
        merge_definitions("X = 1\n", "def read(self, query):\n    return ''\n")


@pytest.mark.parametrize(("configured", "model", "expected"), [
    ("auto", "smollm2", "function"), ("auto", "qwen2.5-coder-1.5b-instruct", "function"),
    ("auto", "gpt-4.1", "v4a"), ("auto", "Qwen2.5-Coder-32B-Instruct", "v4a"), ("file", "gpt-4.1", "file"),
])
def test_the_format_is_chosen_per_model(configured: str, model: str, expected: str) -> None:
    assert resolve_format(configured, model) == expected


def test_a_prompt_for_a_small_context_drops_cases_first_and_keeps_the_program() -> None:
    case = Case(question="When did Caroline go?", expected="7 May 2023", prediction="", score=0.0, context="x " * 500)
    full = request(failures=[case, case, case], success=case.model_copy(update={"score": 1.0}),
                   write_example={"raw_text": "hello", "item": {"speaker": "A"}})
    roomy = reflection_messages(full, "function")[1]["content"]
    one_case = reflection_messages(request(failures=[case]), "function")
    budget = int((len(one_case[0]["content"]) + len(one_case[1]["content"])) / CHARS_PER_TOKEN) + 10
    tight = reflection_messages(full, "function", max_prompt_tokens=budget)
    text = tight[0]["content"] + tight[1]["content"]
    assert len(text) / CHARS_PER_TOKEN <= budget < len(roomy) / CHARS_PER_TOKEN
    assert PARENT in tight[1]["content"] and "Failed case 1" in tight[1]["content"]
    assert "A case that worked" not in tight[1]["content"] and instructions("function", PARENT) in tight[1]["content"]


def test_a_function_repair_carries_the_failed_reply_and_its_error() -> None:
    fixtures = Path(__file__).parent / "fixtures" / "replies"
    broken = (fixtures / "function_syntax_error.txt").read_text().split("\n", 1)[1]
    good = (fixtures / "function_method_toplevel.txt").read_text().split("\n", 1)[1]
    with ScriptedServer() as server:
        server.replies.extend([broken, broken, good])
        client = LLMClient(ChatEndpoint("reflector", EndpointConfig(base_url=server.base_url, model="m")), cache=MemoryCache())
        child = LLMReflector(client, edit_format="function", max_repairs=3).reflect(request(), smoke)
    assert isinstance(child, Child) and child.attempts == 3 and child.edit_format == "function"
    first, second, third = server.prompts
    assert "whole method" in first[1]["content"] and len(first) == 2
    for repair, attempt in ((second, 1), (third, 2)):
        assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]  # one failed turn, not all
        assert repair[2]["content"] == broken and f"Attempt {attempt} of 4 failed" in repair[3]["content"]
        assert "not valid Python" in repair[3]["content"]
    assert second != third  # a cache keyed by the request cannot replay the same failure


def test_a_method_taken_from_a_class_block_keeps_its_multiline_string() -> None:
    code = 'class KnowledgeBase:\n    def read(self, query):\n        note = """first\nsecond"""\n        return note\n'
    merged = merge_definitions(PARENT, code)
    assert '        note = """first\nsecond"""' in merged.source and "def write(" in merged.source


NEW_READ = '''def read(self, query: Query) -> str:
    if self.count == 0:
        return ""
    found = self.collection.query(query_texts=[query.query], n_results=min(8, self.count))
    return "\\n\\n".join(found["documents"][0])[:MAX_CONTEXT_CHARS]
'''


def _class_as_it_is() -> str:
    """The parent's whole KnowledgeBase class, unchanged, as a model pastes it "for context"."""
    return PARENT[PARENT.index("class KnowledgeBase:"):]


@pytest.mark.parametrize("layout", ["one block", "two blocks"])
def test_a_changed_method_is_not_undone_by_a_later_copy_of_the_class_as_it_was(layout: str) -> None:
    code = NEW_READ + "\n\n" + _class_as_it_is()
    reply = (f"COMMIT_MESSAGE: top 8\n```python\n{code}```\n" if layout == "one block" else
             f"COMMIT_MESSAGE: top 8\n```python\n{NEW_READ}```\nThe whole class:\n```python\n{_class_as_it_is()}```\n")
    edit = read_edit(PARENT, reply, "function")
    assert "n_results=min(8, self.count)" in edit.source and edit.source != PARENT
    assert any(t.startswith("ignored: a later copy of KnowledgeBase.read") for t in edit.tolerances)
    assert edit.unchanged == ["KnowledgeBase.__init__", "KnowledgeBase.write"]
    assert check_child(PARENT, edit.source, request(), smoke) is None


def test_a_method_restated_unchanged_alone_is_no_change_and_named():
    original = PARENT[PARENT.index("    def read("):].replace("\n    ", "\n")[4:]
    edit = read_edit(PARENT, f"COMMIT_MESSAGE: better\n```python\n{original}```\n", "function")
    assert edit.source == PARENT and edit.unchanged == ["KnowledgeBase.read"]
    error = check_child(PARENT, edit.source, request(), smoke, edit.unchanged)
    assert "leaves the program as it was: KnowledgeBase.read in your reply is the same code" in error
