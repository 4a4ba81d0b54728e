"""LLM-judge scoring for LoCoMo (the paper's second metric): a judge model says whether the given answer
means the same as the gold one, forgiving wording and format (a date written differently, extra words)
that token F1 punishes. The verdict is asked for as JSON; an unreadable verdict is recorded as unjudged,
never guessed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mstar_ray.llm.structured import parse_json_object

if TYPE_CHECKING:
    from mstar_ray.llm.client import LLMClient

JUDGE_PROMPT = """You grade an answer to a question about a long conversation.
Question: {question}
Gold answer: {expected}
Given answer: {prediction}

The given answer is CORRECT if it refers to the same thing as the gold answer: be generous about wording,
extra detail and date formats (e.g. "7 May 2023" and "May 7th" are the same), but an answer that
contradicts or misses the gold answer is WRONG, and so is an empty one.
Reply with one JSON object: {{"reasoning": "one short sentence", "verdict": "CORRECT" or "WRONG"}}"""

JUDGE_MAX_TOKENS = 96


def read_verdict(reply: str) -> float | None:
    """1.0 for CORRECT, 0.0 for WRONG, ``None`` when the reply does not say either way."""
    obj, _ = parse_json_object(reply)
    verdict = str(obj.get("verdict", "")).strip().upper() if obj else ""
    if verdict in {"CORRECT", "WRONG"}:
        return 1.0 if verdict == "CORRECT" else 0.0
    return None


class Judge:
    def __init__(self, client: LLMClient):
        self.client = client

    def __call__(self, question: str, expected: str, prediction: str) -> float | None:
        if not prediction.strip():
            return 0.0  # nothing to judge; spares a call
        prompt = JUDGE_PROMPT.format(question=question, expected=expected, prediction=prediction)
        reply = self.client.complete(
            [{"role": "user", "content": prompt}], step="judge", json_mode=True, max_tokens=JUDGE_MAX_TOKENS
        )
        return read_verdict(reply.text)
