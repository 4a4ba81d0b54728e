"""The reflector that reads the run (``search.reflector: llm-reader``): before it answers, the model may call
read-only tools over the run directory (``reflect.run_reader``: the programs and their scores, a program's
source, its per-question results and failure traces with their stages, the diff of two programs, a search of
the history) through the endpoint's tool calls, for at most ``max_turns`` turns, ``max_read_tokens`` tokens and
``max_read_s`` seconds; then it answers in the configured edit format, checked and repaired as the one-shot
reflector's answer is (its repairs carry the whole reading). What it reads never holds the answers of the
questions that score a program (the reader's guard). With no run directory reachable (a reflector on another
node without the run's filesystem) it answers as the one-shot reflector does."""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar
from typing import Any

from mstar_ray.llm.settings import ReflectorConfig
from mstar_ray.llm.client import LLMClient
from mstar_ray.reflect.base import ReflectorSetup
from mstar_ray.reflect.edit_formats import resolve_format
from mstar_ray.reflect.one_shot import LLMReflector
from mstar_ray.reflect.request import ReflectionRequest
from mstar_ray.reflect.run_reader import TOOLS, RunReader

READING = ("\n\nBefore you answer you may read the whole run with the tools offered (every program tried, its "
           "scores, its results and failure traces, diffs, a search of the history): at most {turns} turns of tool "
           "calls. When you know what to change, answer as asked.")
ANSWER = "Reading is over. Now reply with your change, exactly in the format asked above."


class ReadingReflector(LLMReflector):
    name: ClassVar[str] = "llm-reader"

    def __init__(self, client: LLMClient, *, run_dir: str | Path | None = None, max_turns: int = 6, max_read_tokens: int = 60000,
                 max_read_s: float = 600.0, tool_result_chars: int = 4000, **one_shot: Any):
        super().__init__(client, **one_shot)
        self.run_dir = Path(run_dir) if run_dir and Path(run_dir).is_dir() else None
        self.max_turns, self.max_read_tokens, self.max_read_s = max_turns, max_read_tokens, max_read_s
        self.tool_result_chars = tool_result_chars
        self.last_reader: RunReader | None = None  # the last reflection's reader (its count of tool calls)

    @classmethod
    def _one(cls, setup: ReflectorSetup, config: ReflectorConfig, client: LLMClient) -> ReadingReflector:
        return cls(client, edit_format=resolve_format(config.edit_format, client.model),
                   context_tokens=config.context_tokens, max_repairs=setup.max_repairs, run_dir=setup.run_dir,
                   max_turns=config.max_turns, max_read_tokens=config.max_read_tokens, max_read_s=config.max_read_s,
                   tool_result_chars=config.tool_result_chars)

    def _opening(self, request: ReflectionRequest) -> list[dict[str, Any]]:
        messages = super()._opening(request)
        if request.kind != "improve" or self.run_dir is None:
            return messages
        reader = self.last_reader = RunReader(self.run_dir, max_chars=self.tool_result_chars)
        messages = [{**messages[0], "content": messages[0]["content"] + READING.format(turns=self.max_turns)},
                    *messages[1:]]
        started, tokens = time.monotonic(), 0
        for _ in range(self.max_turns):
            completion = self.client.complete(messages, step="read", tools=TOOLS)
            tokens += completion.prompt_tokens + completion.completion_tokens
            if not completion.tool_calls:
                break  # it is ready: the answer is asked for below, in the format's own words
            messages.append({"role": "assistant", "content": completion.text or None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in completion.tool_calls]})
            messages += [{"role": "tool", "tool_call_id": c.id, "content": reader.call(c.name, c.arguments)}
                         for c in completion.tool_calls]
            if tokens >= self.max_read_tokens or time.monotonic() - started >= self.max_read_s:
                break
        return [*messages, {"role": "user", "content": ANSWER}]

    def _repair_base(self, request: ReflectionRequest, opening: list[dict[str, Any]], reserved_chars: int) -> list[dict[str, Any]]:
        if self.run_dir is None or request.kind != "improve":
            return super()._repair_base(request, opening, reserved_chars)
        return opening[:-1]  # the reading, without its closing ask: the repair turn asks again

    def _ask(self, messages: list[dict[str, Any]], step: str) -> str:
        if any(m.get("role") == "tool" for m in messages):  # tools offered, none to be called: the answer now
            return self.client.complete(messages, step=step, tools=TOOLS, tool_choice="none").text
        return super()._ask(messages, step)
