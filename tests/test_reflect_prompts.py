"""What the reflector shows a model: every code block in every prompt it can build parses (issue 15: the
worked example held a broken string literal, and a small model copied it); the function format's example
is the parent's own method, so a copy of it is refused as no change, naming what came back unchanged; the
history tells the model what earlier attempts on the parent changed, and how many changed nothing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.program_id import program_id
from mstar_ray.reflect.edit_formats import EDIT_FORMATS, instructions, read_edit
from mstar_ray.reflect.offline import NoMutation, propose
from mstar_ray.reflect.prompt import reflection_messages, repair_messages
from mstar_ray.reflect.reflector import check_child
from mstar_ray.reflect.request import ALREADY_EVALUATED, NO_CHANGE, Case, LineageEntry, ReflectionRequest, Relative
from mstar_ray.reflect.smoke import smoke_test
from tests.conftest import SEEDS, seed_source

FENCED = re.compile(r"^ {0,3}```[ \t]*([\w+.-]*)[ \t]*\n(.*?)^ {0,3}```", re.MULTILINE | re.DOTALL)
REPLIES = sorted((Path(__file__).parent / "fixtures" / "replies").glob("*.txt"))


def parents() -> list[str]:
    """The seeds and a few offline mutations of them (constants, methods and classes changed)."""
    import random

    seeds = [path.read_text() for path in sorted(SEEDS.glob("*.py"))]
    found, rng = list(seeds), random.Random(3)
    while len(found) < len(seeds) + 6:
        try:
            found.append(propose(rng.choice(seeds), seeds, rng).source)
        except NoMutation:
            continue
    return found


def requests(parent: str) -> list[ReflectionRequest]:
    case = Case(question="When did Jolene go to Rio?", expected="29 August 2023", prediction="", score=0.0,
                query={"query": "Rio trip"}, context='Jolene: "we went" \\n to Rio\n```not a fence```')
    lineage = [LineageEntry(id="a", relation="parent", commit_message="seed", score=0.2),
               LineageEntry(id="-", relation="child", commit_message="(no valid child)", note=NO_CHANGE + ": read"),
               LineageEntry(id="b", relation="child", commit_message="x", score=0.1, delta=-0.1, changed=["TOP_K"])]
    base = dict(parent_id=program_id(parent), parent_source=parent, parent_score=0.2)
    return [
        ReflectionRequest(**base, lineage=lineage, failures=[case, case], success=case.model_copy(update={"score": 1.0}),
                          write_example={"raw_text": "[1 May] A: hi", "item": {"speaker": "A"}}),
        ReflectionRequest(**base, frozen_code=True),
        ReflectionRequest(**base, kind="runtime_fix", violation="during read: [timeout] read took 61 s\nTraceback ..."),
    ]


def our_blocks(messages: list[dict[str, str]]) -> list[tuple[str, str]]:
    """(info, code) of every fenced block in the messages we write (the model's own replies are its text)."""
    return [(m.group(1), m.group(2)) for message in messages if message["role"] != "assistant"
            for m in FENCED.finditer(message["content"])]


@pytest.mark.parametrize("edit_format", EDIT_FORMATS)
def test_every_code_block_in_every_prompt_parses(edit_format: str) -> None:
    shown = 0
    replies = [path.read_text().split("\n", 1)[1] for path in REPLIES]
    for parent in parents():
        for request in requests(parent):
            first = reflection_messages(request, edit_format)
            small = reflection_messages(request, edit_format, max_prompt_tokens=900)
            repairs = [repair_messages(first, reply, f"Attempt failed: {reply[:80]}", 1, 3, edit_format) for reply in replies[:6]]
            for messages in [first, small, *repairs]:
                for info, code in our_blocks(messages):
                    assert info in ("python", ""), f"a {info!r} block shown to the model"
                    ast.parse(code)  # a SyntaxError here is a broken example a small model would copy
                    shown += 1
    assert shown > 0


def test_the_function_example_is_the_parents_own_method_and_parses() -> None:
    for parent in parents():
        text = instructions("function", parent)
        (code,) = [m.group(2) for m in FENCED.finditer(text)]
        message, method = ast.parse(code).body
        assert message.targets[0].id == "COMMIT_MESSAGE"  # the commit message inside the block, first
        assert method.name in ("read", "write")
        kb = next(n for n in ast.parse(parent).body if isinstance(n, ast.ClassDef) and n.name == "KnowledgeBase")
        theirs = next(m for m in kb.body if isinstance(m, ast.FunctionDef) and m.name == method.name)
        assert ast.dump(theirs) == ast.dump(method)


def test_a_reply_that_pastes_the_example_is_refused_as_no_change_naming_it() -> None:
    parent = seed_source("vector_search")
    request = ReflectionRequest(parent_id=program_id(parent), parent_source=parent, parent_score=0.2)
    example = instructions("function", parent).split("would be refused):\n", 1)[1]
    edit = read_edit(parent, example, "function")
    error = check_child(parent, edit.source, request, lambda s: smoke_test(s, HashingEmbedder()), edit.unchanged)
    assert error is not None and error.startswith(NO_CHANGE) and "KnowledgeBase.read" in error


def test_a_child_that_only_reformats_the_parent_is_no_change() -> None:
    parent = seed_source("vector_search")
    request = ReflectionRequest(parent_id=program_id(parent), parent_source=parent, parent_score=0.2)
    reformatted = parent.replace("        docs = found", "        # the best chunks first\n        docs = found")
    assert reformatted != parent
    assert check_child(parent, reformatted, request, lambda s: None).startswith(NO_CHANGE)


def test_the_history_says_what_earlier_attempts_changed_and_how_many_changed_nothing() -> None:
    parent = seed_source("vector_search")
    lineage = [
        LineageEntry(id="p", relation="parent", commit_message="seed", score=0.2),
        LineageEntry(id="-", relation="child", commit_message="(no valid child)",
                     note=NO_CHANGE + ": KnowledgeBase.read in your reply is the same code as in the program"),
        LineageEntry(id="c", relation="child", commit_message="top 8", score=0.2, delta=0.0, changed=["TOP_K"],
                     note=f"identical to a program {ALREADY_EVALUATED}"),
        LineageEntry(id="d", relation="child", commit_message="newest first", score=0.25, delta=0.05,
                     changed=["KnowledgeBase.read"]),
    ]
    request = ReflectionRequest(parent_id="p", parent_source=parent, parent_score=0.2, lineage=lineage)
    text = reflection_messages(request, "function")[1]["content"]
    assert "it changed TOP_K" in text and "it changed KnowledgeBase.read" in text
    assert "Of the 3 attempts already made on this program, 1 changed nothing and 1 repeated a program" in text


def test_the_history_says_which_parts_no_change_in_the_run_has_moved() -> None:
    parent = seed_source("vector_search")
    request = ReflectionRequest(parent_id="p", parent_source=parent, parent_score=0.2,
                                inert_parts=["INSTRUCTION_QUERY", "INSTRUCTION_RESPONSE"])
    text = reflection_messages(request, "function")[1]["content"]
    assert ("Across this run, every child that changed INSTRUCTION_QUERY, INSTRUCTION_RESPONSE scored exactly what "
            "its parent scored") in text
    assert "Across this run" not in reflection_messages(request.model_copy(update={"inert_parts": []}),
                                                        "function")[1]["content"]


def test_the_history_says_what_other_lines_gained_by() -> None:
    parent = seed_source("vector_search")
    gained = Relative(id="b" * 16, source=parent, origin="reflection", parent="a" * 16, ancestor_id="a" * 16,
                      ancestor_source=parent, commit_message="keep a table of date and speaker", gain=0.08)
    request = ReflectionRequest(parent_id="p", parent_source=parent, parent_score=0.2, relatives=[gained])
    text = reflection_messages(request, "function")[1]["content"]
    assert "- #bbbbbbbb (its last change: keep a table of date and speaker): +0.080 over #aaaaaaaa" in text
    assert "other lines" not in reflection_messages(request.model_copy(update={"relatives": []}),
                                                    "function")[1]["content"]


@pytest.mark.parametrize("message", [
    "Attempt 2 of 3 failed: the code in the reply is not valid Python",
    "<what you changed in read() and why>",
    "<what you change in read() and why>",
    "<what you changed and why, one sentence>",
    "the change leaves the program as it was",
    "Seed: vector search over raw-text chunks (top-5, no LLM in read).",  # the parent's own COMMIT_MESSAGE
    "",
])
def test_a_commit_message_that_echoes_our_prompt_is_replaced_by_what_changed(message: str) -> None:
    from mstar_ray.reflect.reflector import commit_message

    parent = seed_source("vector_search")
    child = parent.replace("TOP_K = 5", "TOP_K = 8")
    assert commit_message(message, parent, child) == "changed TOP_K (no message of its own)"


def test_a_commit_message_of_its_own_is_kept() -> None:
    from mstar_ray.reflect.reflector import commit_message

    parent = seed_source("vector_search")
    assert commit_message("Return eight chunks", parent, parent.replace("TOP_K = 5", "TOP_K = 8")) == "Return eight chunks"
    # seen in a real run: the placeholder's brackets around the model's own words
    assert commit_message("<change read() to return eight chunks>", parent, parent) == "change read() to return eight chunks"


def test_a_child_that_only_adds_code_nothing_uses_is_refused():
    """issue 15: a 0.5B coder's 'child' re-wrote the program and added KnowledgeBase.answer_query, which the
    agent never calls: it would have cost an evaluation to learn it behaves as its parent."""
    parent = seed_source("vector_search")
    request = ReflectionRequest(parent_id=program_id(parent), parent_source=parent, parent_score=0.2)
    idle = parent + "\n    def answer_query(self, query: Query) -> str:\n        return 'Answering question...'\n"
    error = check_child(parent, idle, request, lambda s: None)
    assert error.startswith(NO_CHANGE) and "only adds KnowledgeBase.answer_query" in error
    used = idle.replace("        docs = found", "        self.answer_query(query)\n        docs = found")
    assert check_child(parent, used, request, lambda s: None) is None
    constant = parent.replace("TOP_K = 5\n", "TOP_K = 5\nEXTRA_K = 3\n")
    assert "only adds EXTRA_K" in check_child(parent, constant, request, lambda s: None)
    assert check_child(parent, constant.replace("min(TOP_K", "min(TOP_K + EXTRA_K"), request, lambda s: None) is None
