"""The model author: the answer plan, the question and the blind reading each one chat request through the
run's ``LLMClient`` (its limits, cache and ledger), JSON mode, with bounded replies. What it replies is checked
by ``mstar_ray.supervise.plan`` exactly as the offline author's is."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mstar_ray.supervise.bundles import Bundle, Piece
from mstar_ray.supervise.plan import AnswerPlan

if TYPE_CHECKING:
    from mstar_ray.llm.client import LLMClient

PLAN = """You write one question about a person's history, as an answer plan first.
Records (each opens with its id in brackets, then its date if known):
{records}

Choose facts stated in these records that together answer one question. Reply with one JSON object:
{{"topic": "what the question is about", "facts": [{{"piece": "<record id>", "quote": "<words copied exactly from that record>"}}],
 "operation": "single" or "comparison" or "temporal_order" or "update" or "aggregation",
 "answer": "<a short answer>", "answer_type": "entity" or "date" or "number" or "yes_no" or "phrase"}}
Copy every quote word for word from the record it cites. For a single fact, the answer must be in its quote
(for a date, the record's date counts). Comparison, temporal order, update and aggregation need facts from
two or more records."""

QUESTION = """Write one standalone question whose answer is exactly: {answer}
It must be answerable from these facts, combined by {operation}:
{facts}
Do not put the answer or any record id in the question. Reply with one JSON object: {{"question": "..."}}"""

VERIFY = """Answer the question from these records only.
Records (each opens with its id in brackets):
{records}

Question: {question}
Answer type: {answer_type}
Reply with one JSON object: {{"answerable": true or false, "answer": "<a short answer>", "citations": ["<the ids of every record you used>"]}}"""

PLAN_TOKENS, QUESTION_TOKENS, VERIFY_TOKENS = 400, 96, 160


class LLMAuthor:
    def __init__(self, client: LLMClient):
        self.client = client
        self.name = f"llm:{client.model}"

    def _ask(self, prompt: str, step: str, max_tokens: int) -> str:
        return self.client.complete([{"role": "user", "content": prompt}], step=step, json_mode=True,
                                    max_tokens=max_tokens).text

    def plan(self, bundle: Bundle) -> str:
        return self._ask(PLAN.format(records=bundle.render()), "supervise_plan", PLAN_TOKENS)

    def question(self, plan: AnswerPlan, bundle: Bundle) -> str:
        facts = "\n".join(f'- "{fact.quote}" ({fact.piece})' for fact in plan.facts)
        return self._ask(QUESTION.format(answer=plan.answer, operation=plan.operation.replace("_", " "), facts=facts),
                         "supervise_question", QUESTION_TOKENS)

    def verify(self, question: str, answer_type: str, cited: list[Piece]) -> str:
        return self._ask(VERIFY.format(records=Bundle(tuple(cited)).render(), question=question, answer_type=answer_type),
                         "supervise_verify", VERIFY_TOKENS)
