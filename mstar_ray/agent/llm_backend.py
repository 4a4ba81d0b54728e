"""The task agent on a real chat model: each protocol step becomes one prompt (plus at most one
corrective retry for a structured step whose JSON does not fit the program's schema)."""

from __future__ import annotations

from typing import Any

from mstar_ray.llm.endpoint import ChatEndpoint
from mstar_ray.llm.structured import conform, fallback, parse_json_object
from mstar_ray.schema import FieldSpec

ANSWER_MAX_TOKENS = 64


def _schema_lines(fields: list[FieldSpec]) -> str:
    lines = []
    for spec in fields:
        kind = f"{spec.type} or null" if spec.optional else spec.type
        note = f": {spec.description}" if spec.description else ""
        lines.append(f'- "{spec.name}" ({kind}){note}')
    return "\n".join(lines)


class LLMBackend:
    """``AgentBackend`` over OpenAI-compatible endpoints: ``task`` for the protocol's steps, ``toolkit``
    for the memory program's own ``llm_completion`` calls."""

    def __init__(self, task: ChatEndpoint, toolkit: ChatEndpoint | None = None):
        self.task = task
        self.toolkit = toolkit or task
        self.name = f"llm:{task.config.model}"
        self.stats: dict[str, int] = {
            "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "json_retries": 0, "json_fallbacks": 0,
        }

    def _complete(self, endpoint: ChatEndpoint, messages: list[dict[str, str]], **kwargs: Any) -> str:
        completion = endpoint.complete(messages, **kwargs)
        self.stats["calls"] += 1
        self.stats["prompt_tokens"] += completion.prompt_tokens
        self.stats["completion_tokens"] += completion.completion_tokens
        return completion.text

    def _structured(self, instruction: str, fields: list[FieldSpec], label: str, text: str) -> dict[str, Any]:
        prompt = (
            f"{instruction}\n\nReply with one JSON object with exactly these fields:\n{_schema_lines(fields)}\n\n"
            f"{label}:\n{text}"
        )
        messages = [
            {"role": "system", "content": "You reply with a single JSON object and nothing else."},
            {"role": "user", "content": prompt},
        ]
        reply = self._complete(self.task, messages, json_mode=True)
        conformed, errors = self._read_reply(reply, fields)
        if errors:
            # One corrective retry that shows the model its own reply and what is wrong with it.
            self.stats["json_retries"] += 1
            messages += [
                {"role": "assistant", "content": reply[:2000]},
                {"role": "user", "content": "That reply does not fit the schema: " + "; ".join(errors)
                 + ". Reply again with only the corrected JSON object."},
            ]
            reply = self._complete(self.task, messages, json_mode=True)
            conformed, errors = self._read_reply(reply, fields)
        if errors:
            self.stats["json_fallbacks"] += 1
            return fallback(fields, text)
        return conformed

    @staticmethod
    def _read_reply(reply: str, fields: list[FieldSpec]) -> tuple[dict[str, Any], list[str]]:
        obj, problem = parse_json_object(reply)
        if obj is None:
            return {}, [problem or "no JSON object"]
        return conform(obj, fields)

    def extract_item(self, instruction: str, fields: list[FieldSpec], raw_text: str) -> dict[str, Any]:
        return self._structured(instruction, fields, "Text", raw_text)

    def build_query(self, instruction: str, fields: list[FieldSpec], question: str) -> dict[str, Any]:
        return self._structured(instruction, fields, "Question", question)

    def answer(self, instruction: str, always_on: str, context: str, question: str) -> str:
        parts = [p for p in (always_on.strip(), f"Memory:\n{context}" if context else "Memory: (empty)") if p]
        prompt = "\n\n".join(parts + [instruction, f"Question: {question}\nAnswer:"])
        reply = self._complete(self.task, [{"role": "user", "content": prompt}], max_tokens=ANSWER_MAX_TOKENS)
        return reply.strip().splitlines()[0].strip() if reply.strip() else ""

    def toolkit_completion(self, messages: list[dict[str, str]]) -> str:
        return self._complete(self.toolkit, messages)
