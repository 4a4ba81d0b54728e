"""``quote_evidence``: a read() that asks its toolkit model to answer asks it for the evidence instead."""

from __future__ import annotations

import random
from typing import Any

import pytest

from mstar_ray.agent.offline import toolkit_answer
from mstar_ray.contract import check_source
from mstar_ray.reflect.offline import NoMutation, quote_evidence
from mstar_ray.reflect.offline.reflective import cues
from mstar_ray.reflect.request import Case

PROGRAM = '''from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = "Note the text."
INSTRUCTION_QUERY = "Ask."
INSTRUCTION_RESPONSE = "Answer."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.records = []

    def write(self, item, raw_text):
        self.records.append(raw_text)

    def read(self, query):
        return self.toolkit.llm_completion(self.prompt(query.text))

    def prompt(self, question):
        return [{"role": "user", "content": (
            "Answer the query using only the records below.\\n"
            "Return the most specific answer phrase possible.\\n\\n"
            f"Query: {question}\\n\\n"
            "Records:\\n" + "\\n".join(self.records)
        )}]
'''

RECORD = "[8 May 2023]\nCaroline: I went to the LGBTQ support group yesterday and it was powerful."


class OfflineToolkit:
    """The toolkit's model call answered by the offline agent's own toolkit stand-in."""

    def llm_completion(self, messages: list[dict[str, str]]) -> str:
        return toolkit_answer(messages)


def read(source: str, question: str) -> str:
    scope: dict[str, Any] = {}
    exec(compile(source, "program.py", "exec"), scope)  # our own test program and its edited child
    kb = scope["KnowledgeBase"](OfflineToolkit())
    kb.write(scope["KnowledgeItem"]("x"), RECORD)
    return kb.read(scope["Query"](question))


def test_read_hands_the_answer_step_evidence_instead_of_an_answer() -> None:
    child = quote_evidence(PROGRAM, random.Random(0)).source
    assert check_source(child) == []
    assert child.count("Quote only the lines") == 1  # both answer sentences became one request
    question = "When did Caroline go to the LGBTQ support group?"
    answered = read(PROGRAM, question)
    quoted = read(child, question)
    assert "Caroline" not in answered  # an answer span: who said it and the rest of the line are gone
    assert "Caroline" in quoted and "support group" in quoted and "2023" in quoted


def test_a_read_that_asks_for_no_answer_is_left_alone() -> None:
    with pytest.raises(NoMutation):
        quote_evidence(PROGRAM.replace("Answer the query using only the records below.\\n", "")
                       .replace("Return the most specific answer phrase possible.", "Summarise them."),
                       random.Random(0))


def test_a_bare_answer_in_the_context_points_the_reflector_to_evidence() -> None:
    case = Case(question="When did Caroline go to the support group?", expected="7 May 2023",
                prediction="Not found in memory.", score=0.0, context="Not found in memory.")
    assert cues([case])["quote_evidence"] == 1.0
