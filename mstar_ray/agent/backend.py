"""The task agent's model, as the fixed protocol (docs/design.md section 3) and its task families need it: the four steps
of question answering, a full response to a conversation for rubric-graded tasks, and an episode's next action.

An implementation is either the offline backend (``mstar_ray.agent.offline``), deterministic and
network-free, or a real LLM client that turns each step into a chat prompt.
"""

from __future__ import annotations

from typing import Any, Protocol

from mstar_ray.families.episode.turn import Choice, Turn
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

    def answer(self, instruction: str, always_on: str, context: str, question: str) -> str:
        """Answer the question from the memory's context."""

    def respond(self, instruction: str, always_on: str, context: str, messages: list[dict[str, str]]) -> str:
        """Write the assistant's next message, in full, to a conversation (``role``/``content`` messages ending
        with the user's) from the memory's context."""

    def act(self, instruction: str, always_on: str, context: str, turn: Turn) -> Choice:
        """Pick an episode's next action, one of ``turn.actions``, from the memory's context (read once, at the
        episode's start) and what the episode has shown so far (the episode family's actor step)."""

    def toolkit_completion(self, messages: list[dict[str, str]], step: str = "toolkit",
                           budget: CandidateBudget | None = None) -> str:
        """Serve one ``toolkit.llm_completion(messages)`` call made by a memory program; where replies are
        cached, only in the program's own part of the cache (``budget``, ``mstar_ray.llm.candidate_cache``)."""

    def usage(self) -> dict[str, StepUsage]:
        """Requests so far per step (cumulative; callers take differences)."""
