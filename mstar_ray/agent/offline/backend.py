"""The offline backend: the protocol steps over the rule modules, and what it counted."""

from __future__ import annotations

import threading
from typing import Any

from mstar_ray.families.episode.offline import choose_action
from mstar_ray.families.qa.offline import IDK, answer_from_context
from mstar_ray.agent.offline.extract import extract_item
from mstar_ray.agent.offline.query import build_query
from mstar_ray.families.rubric.offline import respond_from_context
from mstar_ray.agent.offline.toolkit import toolkit_answer
from mstar_ray.families.episode.turn import Choice, Turn
from mstar_ray.llm.candidate_cache import CandidateBudget
from mstar_ray.llm.usage import StepUsage
from mstar_ray.program_schema import FieldSpec

class OfflineBackend:
    """The deterministic, network-free task agent (``name = "offline"``); rules, not a model.

    ``calls`` counts protocol steps served (``extract``/``query``/``answer``/``respond``/``toolkit``/``act``) so callers
    can report how much work a run did. Instructions are accepted for protocol compatibility but do
    not change behaviour: there is no model to instruct.
    """

    name = "offline"
    waits = False  # its steps compute rather than wait: an evaluation runs them one after another by default

    def __init__(self) -> None:
        self.calls: dict[str, int] = {"extract": 0, "query": 0, "answer": 0, "respond": 0, "toolkit": 0, "act": 0}
        self._lock = threading.Lock()

    def _count(self, step: str) -> None:
        with self._lock:  # steps may run on an evaluation's threads
            self.calls[step] += 1

    def extract_item(self, instruction: str, fields: list[FieldSpec], raw_text: str) -> dict[str, Any]:
        self._count("extract")
        return extract_item(fields, raw_text)

    def build_query(self, instruction: str, fields: list[FieldSpec], question: str, step: str = "query") -> dict[str, Any]:
        self._count("query")
        return build_query(fields, question)

    def answer(self, instruction: str, always_on: str, context: str, question: str) -> str:
        self._count("answer")
        # What memory returned for this question is the evidence; always-on text is mostly how to answer (a
        # policy, a format), so a model reads the answer out of it only when the context has nothing on the question.
        for evidence in (context or "", always_on or ""):
            if evidence.strip():
                answer = answer_from_context(evidence, question)
                if answer != IDK:
                    return answer
        return IDK

    def respond(self, instruction: str, always_on: str, context: str, messages: list[dict[str, str]]) -> str:
        self._count("respond")
        combined = "\n".join(part for part in (context or "", always_on or "") if part.strip())
        return respond_from_context(combined, messages)

    def act(self, instruction: str, always_on: str, context: str, turn: Turn) -> Choice:
        self._count("act")
        return choose_action(always_on, context, turn)

    def toolkit_completion(self, messages: list[dict[str, str]], step: str = "toolkit",
                           budget: CandidateBudget | None = None) -> str:  # nothing cached: no budget to keep
        self._count("toolkit")
        return toolkit_answer(messages)

    def usage(self) -> dict[str, StepUsage]:
        return {}  # no model, nothing to cache or pay for
