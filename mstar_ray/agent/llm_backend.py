"""The task agent on a real chat model: each protocol step becomes one prompt (plus at most one
corrective retry for a structured step whose JSON does not fit the program's schema)."""

from __future__ import annotations

import threading
from typing import Any

from mstar_ray.families.episode.actions import explore, match_reply
from mstar_ray.families.episode.turn import Choice, Turn
from mstar_ray.llm.candidate_cache import CandidateBudget
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.structured import conform, fallback, parse_json_object
from mstar_ray.llm.usage import StepUsage
from mstar_ray.program_schema import FieldSpec
from mstar_ray.tasks.rubric import Message, bounded_messages

ANSWER_MAX_TOKENS = 64
RESPONSE_CONVERSATION_CHARS = 12000  # the conversation's end, beside up to 3,000 characters of memory
RESPOND_ROLE = "You are the assistant in the conversation that follows. Write your next message to the user, in full."
# An action is a short phrase; a longer reply is the model talking, and costs every step of every episode.
ACT_MAX_TOKENS = 24
ACT_HISTORY_STEPS = 6  # the most recent steps of the episode shown in each actor prompt
ACT_OBSERVATION_CHARS = 200  # each earlier observation, cut to this (the current one is shown whole)
ACT_SYSTEM = ("You play a text game. Reply with one action copied exactly from the list of admissible actions, and "
              "nothing else.")


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

    waits = True  # every step waits on a model: an evaluation overlaps them (mstar_ray.agent.pipeline)

    def __init__(self, task: LLMClient, toolkit: LLMClient | None = None):
        self.task = task
        self.toolkit = toolkit or task
        self.name = f"llm:{task.model}"
        self.stats: dict[str, int] = {"json_retries": 0, "json_fallbacks": 0, "act_unmatched": 0}
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

    def answer(self, instruction: str, always_on: str, context: str, question: str) -> str:
        parts = [p for p in (always_on.strip(), f"Memory:\n{context}" if context else "Memory: (empty)") if p]
        prompt = "\n\n".join(parts + [instruction, f"Question: {question}\nAnswer:"])
        messages = [{"role": "user", "content": prompt}]
        reply = self.task.complete(messages, step="answer", max_tokens=ANSWER_MAX_TOKENS).text
        return reply.strip().splitlines()[0].strip() if reply.strip() else ""

    def respond(self, instruction: str, always_on: str, context: str, messages: list[dict[str, str]]) -> str:
        shown = bounded_messages([Message.model_validate(m) for m in messages], RESPONSE_CONVERSATION_CHARS)
        # The conversation's own system messages join ours: chat templates take one system message, first.
        own = [m.content for m in shown if m.role == "system"]
        memory = f"Memory:\n{context}" if context else "Memory: (empty)"
        system = "\n\n".join(p for p in (RESPOND_ROLE, *own, always_on.strip(), memory, instruction.strip()) if p)
        chat = [{"role": "system", "content": system}]
        chat += [{"role": m.role, "content": m.content} for m in shown if m.role != "system"]
        # A full reply, not a span: bounded by the role's own max_tokens (the longest any step may take, and what
        # the start-up check sizes the request timeout for), where an answer takes ANSWER_MAX_TOKENS.
        reply = self.task.complete(chat, step="respond").text
        return reply.strip()

    def act(self, instruction: str, always_on: str, context: str, turn: Turn) -> Choice:
        """One chat call per step. The reply is matched to an admissible action (exactly, by containing one,
        or by words: ``actions.match_reply``); a reply that matches none is counted in ``stats`` and the step
        takes the fixed exploration's action instead, with a note in the episode's trace saying so."""
        recent = turn.history[-ACT_HISTORY_STEPS:]
        steps = "\n".join(f"> {action}\n{observation.strip()[:ACT_OBSERVATION_CHARS]}" for action, observation in recent)
        parts = [
            always_on.strip(),
            f"Memory:\n{context}" if context else "Memory: (empty)",
            instruction,
            f"Goal: {turn.goal}",
            f"Your last {len(recent)} of {len(turn.history)} steps:\n{steps}" if recent else "No steps taken yet.",
            f"Now: {turn.observation.strip()}",
            f"{turn.inventory}" if turn.inventory else "",
            # The list last, as a question: asked "reply with one action" after it, SmolLM2-135M echoed the goal or
            # the room in 8 prompts of 8; asked this way it named an admissible action in 5.
            "Which of these actions do you take next?\n" + "\n".join(f"- {action}" for action in turn.actions),
        ]
        messages = [{"role": "system", "content": ACT_SYSTEM},
                    {"role": "user", "content": "\n\n".join(part for part in parts if part)}]
        reply = self.task.complete(messages, step="act", max_tokens=ACT_MAX_TOKENS).text
        action, how = match_reply(reply, turn.actions)
        if action is None:
            self._note("act_unmatched")
            return Choice(explore(turn), f"the model replied {reply.strip()[:80]!r}, no admissible action: explored")
        return Choice(action, "" if how == "exact" else f"the model replied {reply.strip()[:80]!r}")

    def toolkit_completion(self, messages: list[dict[str, str]], step: str = "toolkit",
                           budget: CandidateBudget | None = None) -> str:
        return self.toolkit.complete(messages, step=step, budget=budget).text
