"""The offline backend: the shared steps over the rule modules, a family's own steps by that family's stand-in,
and what it counted."""

from __future__ import annotations

import collections
import threading
from typing import Any

from mstar_ray.agent.offline.extract import extract_item
from mstar_ray.agent.offline.query import build_query
from mstar_ray.agent.offline.completions import toolkit_answer
from mstar_ray.embedding.embedder import Embedder
from mstar_ray.families import meaning
from mstar_ray.families.step import Given, Result, Shown, Step
from mstar_ray.llm.candidate_cache import CandidateBudget
from mstar_ray.llm.usage import StepUsage
from mstar_ray.program_schema import FieldSpec


class OfflineBackend:
    """The deterministic, network-free task agent (``name = "offline"``); rules, not a model.

    ``calls`` counts steps served by name (``extract``/``query``/``toolkit`` and each family step it performed)
    so callers can report how much work a run did. Instructions are accepted for protocol compatibility but do
    not change behaviour: there is no model to instruct. ``meaning`` is the run's embedding model, lent to a
    family's step while it runs so its stand-in can read for meaning (``mstar_ray.families.meaning``); without
    one the stand-ins read words only.
    """

    name = "offline"
    waits = False  # its steps compute rather than wait: an evaluation runs them one after another by default

    def __init__(self, meaning: Embedder | None = None) -> None:
        self.meaning = meaning
        self.calls: collections.Counter[str] = collections.Counter({"extract": 0, "query": 0, "toolkit": 0})
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

    def perform(self, step: Step[Given, Result], shown: Shown, given: Given) -> Result:
        self._count(step.name)
        with meaning.lent(self.meaning):
            return step.offline(shown, given)  # the family's own rule for its step: no prompt to read

    def toolkit_completion(self, messages: list[dict[str, str]], step: str = "toolkit",
                           budget: CandidateBudget | None = None) -> str:  # nothing cached: no budget to keep
        self._count("toolkit")
        return toolkit_answer(messages)

    def usage(self) -> dict[str, StepUsage]:
        return {}  # no model, nothing to cache or pay for
