"""``second_read``: a program's read() reads again for the person a two-hop question names by a relation."""

from __future__ import annotations

import ast
import random
from pathlib import Path
from typing import Any

import pytest

from mstar_ray.contract import check_source
from mstar_ray.reflect.offline import READ_LIMIT, NoMutation, fuse_keyword_scores, second_read
from mstar_ray.reflect.offline.evidence import _reached
from mstar_ray.reflect.offline.reflective import cues
from mstar_ray.reflect.request import Case

# A memory that returns the two lines sharing the most words with the query: one read finds who adopted Fennel,
# never what that person drives.
PROGRAM = '''from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = "Note the text."
INSTRUCTION_QUERY = "Ask."
INSTRUCTION_RESPONSE = "Answer."
ALWAYS_ON_KNOWLEDGE = ""
TOP = 2


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str
    limit: int


def words(text):
    return set(text.lower().replace(":", " ").replace(".", " ").replace("?", " ").split())


class KnowledgeBase:
    def __init__(self, toolkit):
        self.lines = []

    def write(self, item, raw_text):
        self.lines.extend(line for line in raw_text.split("\\n") if line.strip())

    def read(self, query):
        wanted = words(query.text)
        ranked = sorted(self.lines, key=lambda line: -len(wanted & words(line)))
        return "\\n".join(ranked[:TOP])
'''

TEXT = """Olivia: Today we brought home a budgie called Fennel.
Emil: I drive the car my brother lent me.
Olivia: I picked up my new Peugeot today, a lovely little car."""


def memory(source: str) -> tuple[Any, type]:
    scope: dict[str, Any] = {}
    exec(compile(source, "program.py", "exec"), scope)  # our own test program and its edited child
    kb = scope["KnowledgeBase"](None)
    kb.write(scope["KnowledgeItem"]("x"), TEXT)
    return kb, scope["Query"]


def test_a_second_read_finds_what_is_asked_about_the_person_a_relation_names() -> None:
    child = second_read(PROGRAM, random.Random(0)).source
    assert check_source(child) == []
    question = "Which car does the person who adopted Fennel drive now?"
    parent_kb, parent_query = memory(PROGRAM)
    child_kb, child_query = memory(child)
    assert "Peugeot" not in parent_kb.read(parent_query(question, 2))
    found = child_kb.read(child_query(question, 2))
    assert "Peugeot" in found and "Fennel" in found
    assert set(found.split("\n")) == set(TEXT.split("\n"))  # both reads' lines, each once


def test_a_question_without_a_relation_reads_once_as_before() -> None:
    child = second_read(PROGRAM, random.Random(0)).source
    question = "Which car does Olivia drive now?"
    parent_kb, parent_query = memory(PROGRAM)
    child_kb, child_query = memory(child)
    assert child_kb.read(child_query(question, 2)) == parent_kb.read(parent_query(question, 2))


def test_it_applies_once_and_needs_a_text_field() -> None:
    child = second_read(PROGRAM, random.Random(0)).source
    with pytest.raises(NoMutation):
        second_read(child, random.Random(0))
    with pytest.raises(NoMutation):
        second_read(PROGRAM.replace("    text: str\n    limit: int", "    limit: int"), random.Random(0))


def test_a_relation_in_a_failed_question_points_the_reflector_to_a_second_read() -> None:
    case = Case(question="What is the favourite food of the person who adopted Bramble?", expected="biryani",
                prediction="mile", score=0.0, context="")
    assert cues([case])["second_read"] == 1.0


def test_fusion_after_a_second_read_keeps_within_the_cap() -> None:
    # Both reads' lines are joined by single newlines; keyword fusion sets entries apart by a blank line, and
    # once made a 3,000-character read 3,027 long (a quickstart child, scored 0 for it).
    child = fuse_keyword_scores(second_read(PROGRAM, random.Random(0)).source, random.Random(0)).source
    scope: dict[str, Any] = {}
    exec(compile(child, "program.py", "exec"), scope)
    text = "\n".join(f"Olivia: line {i} about the budgie Fennel" for i in range(80))[:READ_LIMIT]
    fused = scope["fuse_by_query"](text, "Fennel")
    assert len(fused) <= len(text) and fused.startswith("Olivia: line")


SEEDS = sorted((Path(__file__).resolve().parents[1] / "seeds").glob("*.py"))


@pytest.mark.parametrize("path", SEEDS, ids=[p.stem for p in SEEDS])
def test_a_read_that_asks_the_toolkit_model_is_never_read_twice(path: Path) -> None:
    # The contract allows one toolkit call per read(): a second read of such a read() broke it
    # ("2 toolkit LLM calls in one read(); at most 1 allowed", a quickstart best-of-N run).
    source = path.read_text()
    if "llm_completion" not in source:
        pytest.skip("no toolkit model call in this seed")
    try:
        child = second_read(source, random.Random(0)).source
    except NoMutation:
        return
    reached = _reached(ast.parse(child))
    assert not any(isinstance(n, ast.Attribute) and n.attr == "llm_completion" for fn in reached for n in ast.walk(fn))


def test_a_read_asking_the_model_through_a_helper_is_not_read_twice() -> None:
    asking = PROGRAM.replace("        self.lines = []", "        self.lines = []\n        self.toolkit = toolkit").replace(
        '        return "\\n".join(ranked[:TOP])', '        return self._ask("\\n".join(ranked[:TOP]))\n\n'
        '    def _ask(self, lines):\n        return self.toolkit.llm_completion(lines)')
    assert "llm_completion" in asking
    with pytest.raises(NoMutation, match="toolkit model"):
        second_read(asking, random.Random(0))
