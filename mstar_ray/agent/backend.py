"""The task agent's model, as the fixed protocol (docs/design.md section 3) needs it: the two steps every family
shares (a ``KnowledgeItem`` from each raw text, a ``Query`` from each question), the memory program's own toolkit
calls, and one generic call, ``perform``, for the steps a family defines itself (``mstar_ray.families.step``:
answering a question, replying to a conversation, picking an action, ...).

An implementation is either the offline backend (``mstar_ray.agent.offline``), deterministic and
network-free, or a real LLM client that turns each step into a chat prompt.
"""

from __future__ import annotations

from typing import Any, Protocol

from mstar_ray.families.step import Given, Result, Shown, Step
from mstar_ray.llm.candidate_cache import CandidateBudget
from mstar_ray.llm.usage import StepUsage
from mstar_ray.program_schema import FieldSpec


class AgentBackend(Protocol):
    name: str
    waits: bool  # its steps wait on a model (worth overlapping), rather than compute here

    def extract_item(self, instruction: str, fields: list[FieldSpec], raw_text: str) -> dict[str, Any]:
        """Fill a ``KnowledgeItem`` JSON object from one raw text."""

    def build_query(self, instruction: str, fields: list[FieldSpec], question: str, step: str = "query") -> dict[str, Any]:
        """Fill a ``Query`` JSON object from one question; ``step`` names the request in the run's accounts."""

    def perform(self, step: Step[Given, Result], shown: Shown, given: Given) -> Result:
        """One of a family's own steps: on a model, ``step.prompt`` is sent (one request, named ``step.name``,
        its reply bounded by ``step.max_tokens``) and the reply is ``step.parse``d; the offline backend, which has
        no model to prompt, returns the family's own stand-in, ``step.offline``."""

    def toolkit_completion(self, messages: list[dict[str, str]], step: str = "toolkit",
                           budget: CandidateBudget | None = None) -> str:
        """Serve one ``toolkit.llm_completion(messages)`` call made by a memory program; where replies are
        cached, only in the program's own part of the cache (``budget``, ``mstar_ray.llm.candidate_cache``)."""

    def usage(self) -> dict[str, StepUsage]:
        """Requests so far per step (cumulative; callers take differences)."""
