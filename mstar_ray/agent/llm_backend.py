"""The task agent on a real chat model: each protocol step becomes one prompt (plus at most one
corrective retry for a structured step whose JSON does not fit the program's schema); a family's own step
brings its prompt and the reading of the reply with it (``mstar_ray.families.step``)."""

from __future__ import annotations

import threading
from typing import Any

from mstar_ray.families.step import Given, Result, Shown, Step
from mstar_ray.llm.candidate_cache import CandidateBudget
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.structured import conform, fallback, parse_json_object
from mstar_ray.llm.usage import StepUsage
from mstar_ray.program_schema import FieldSpec


def _schema_lines(fields: list[FieldSpec]) -> str:
    lines = []
    for spec in fields:
        kind = f"{spec.type} or null" if spec.optional else spec.type
        note = f": {spec.description}" if spec.description else ""
        lines.append(f'- "{spec.name}" ({kind}){note}')
    return "\n".join(lines)


class LLMBackend:
    """``AgentBackend`` over OpenAI-compatible endpoints: ``task`` for the protocol's steps, ``toolkit``
    for the memory program's own ``llm_completion`` calls. Requests go through ``LLMClient``s, so they
    are cached, limited run-wide and accounted for."""

    waits = True  # every step waits on a model: an evaluation overlaps them (mstar_ray.agent.concurrency)

    def __init__(self, task: LLMClient, toolkit: LLMClient | None = None):
        self.task = task
        self.toolkit = toolkit or task
        self.name = f"llm:{task.model}"
        self.stats: dict[str, int] = {"json_retries": 0, "json_fallbacks": 0}
        self._lock = threading.Lock()

    def _note(self, stat: str) -> None:
        with self._lock:  # steps run on an evaluation's threads
            self.stats[stat] += 1

    def usage(self) -> dict[str, StepUsage]:
        merged = self.task.usage()
        if self.toolkit is not self.task:
            merged.update(self.toolkit.usage())
        return merged

    def _structured(self, step: str, instruction: str, fields: list[FieldSpec], label: str, text: str) -> dict[str, Any]:
        prompt = (
            f"{instruction}\n\nReply with one JSON object with exactly these fields:\n{_schema_lines(fields)}\n\n"
            f"{label}:\n{text}"
        )
        messages = [
            {"role": "system", "content": "You reply with a single JSON object and nothing else."},
            {"role": "user", "content": prompt},
        ]
        reply = self.task.complete(messages, step=step, json_mode=True).text
        conformed, errors = self._read_reply(reply, fields)
        if errors:
            # One corrective retry that shows the model its own reply and what is wrong with it.
            self._note("json_retries")
            messages += [
                {"role": "assistant", "content": reply[:2000]},
                {"role": "user", "content": "That reply does not fit the schema: " + "; ".join(errors)
                 + ". Reply again with only the corrected JSON object."},
            ]
            reply = self.task.complete(messages, step=step, json_mode=True).text
            conformed, errors = self._read_reply(reply, fields)
        if errors:
            self._note("json_fallbacks")
            return fallback(fields, text)
        return conformed

    @staticmethod
    def _read_reply(reply: str, fields: list[FieldSpec]) -> tuple[dict[str, Any], list[str]]:
        obj, problem = parse_json_object(reply)
        if obj is None:
            return {}, [problem or "no JSON object"]
        return conform(obj, fields)

    def extract_item(self, instruction: str, fields: list[FieldSpec], raw_text: str) -> dict[str, Any]:
        return self._structured("extract", instruction, fields, "Text", raw_text)

    def build_query(self, instruction: str, fields: list[FieldSpec], question: str, step: str = "query") -> dict[str, Any]:
        return self._structured(step, instruction, fields, "Question", question)

    def perform(self, step: Step[Given, Result], shown: Shown, given: Given) -> Result:
        reply = self.task.complete(step.prompt(shown, given), step=step.name, max_tokens=step.max_tokens).text
        return step.parse(reply, given)

    def toolkit_completion(self, messages: list[dict[str, str]], step: str = "toolkit",
                           budget: CandidateBudget | None = None) -> str:
        return self.toolkit.complete(messages, step=step, budget=budget).text
