"""The smoke test a child must pass before it is worth an evaluation: load it in a sandbox, write one
text, read one query (and give feedback on it, if the program takes feedback). The items are filled without a model and toolkit LLM calls are answered offline:
this checks that the program runs, not how well it remembers."""

from __future__ import annotations

from mstar_ray.agent.offline import toolkit_answer
from mstar_ray.contract import inspect_program
from mstar_ray.embedding.cached import candidate_embedder
from mstar_ray.embedding.embedder import Embedder
from mstar_ray.llm.candidate_cache import CandidateBudget
from mstar_ray.llm.structured import fallback
from mstar_ray.sandbox_host.outcome import Outcome
from mstar_ray.sandbox_host.process import Sandbox
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits

SAMPLE_TEXT = "[8 May 2023, 10:15] Caroline: I adopted a puppy called Biscuit today, she is three months old."
SAMPLE_QUESTION = "What is the name of Caroline's puppy?"


def _trace(outcome: Outcome) -> str:
    return f"{outcome.describe()}\n{outcome.traceback}".rstrip()


def smoke_test(source: str, embedder: Embedder, limits: SandboxLimits | None = None) -> str | None:
    """``None`` when the program loads, writes and reads; otherwise the full error for the reflector."""
    info = inspect_program(source)
    schema = info.schema
    # In the child's own part of the cache: a smoke test must not tell a child what others embedded either.
    budget = CandidateBudget.of_program(source, (limits or SandboxLimits()).toolkit_cache_mb)
    with Sandbox(source, limits=limits, llm=toolkit_answer, embed=candidate_embedder(embedder, budget).embed) as sandbox:
        outcome = sandbox.start()
        if not outcome.ok:
            return f"smoke test: loading the program failed: {_trace(outcome)}"
        outcome = sandbox.write(fallback(schema.knowledge_item, SAMPLE_TEXT), SAMPLE_TEXT)
        if not outcome.ok:
            return f"smoke test: write() failed: {_trace(outcome)}"
        query = fallback(schema.query, SAMPLE_QUESTION)
        outcome = sandbox.read(query)
        if not outcome.ok:
            return f"smoke test: read() failed: {_trace(outcome)}"
        if info.has_feedback:
            outcome = sandbox.feedback(query, 0.5)
            if not outcome.ok:
                return f"smoke test: feedback() failed: {_trace(outcome)}"
    return None
