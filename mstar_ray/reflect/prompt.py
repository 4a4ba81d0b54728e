"""The reflector's prompts: the reflection itself (SPEC section 4) and the repair turn that sends a
failed attempt back with its full error.

A repair request always differs from the one before it (it carries the failed reply, its error and the
attempt number), so a cache keyed by the request can never replay the same failed answer.
"""

from __future__ import annotations

import json

from sandbox.policy import ALLOWED_IMPORTS

from mstar_ray.reflect.request import Case, ReflectionRequest

SYSTEM = """You improve the memory program of an LLM agent. The program is one Python file:
- @dataclass KnowledgeItem: the fields the agent extracts from each raw text (JSON-compatible types).
- @dataclass Query: the fields the agent fills from each question.
- class KnowledgeBase with __init__(self, toolkit), write(self, item, raw_text) -> None, read(self, query) -> str.
- String constants INSTRUCTION_KNOWLEDGE_ITEM (how to fill KnowledgeItem), INSTRUCTION_QUERY (how to fill
  Query), INSTRUCTION_RESPONSE (how to answer from read()'s text), ALWAYS_ON_KNOWLEDGE (always in the prompt).
Rules: imports only from {imports}; no eval/exec/open/__import__, no files, processes, threads or network.
toolkit.db is a SQLite connection, toolkit.chroma a ChromaDB client (collections embed documents
themselves), toolkit.llm_completion(messages) -> str may be called at most once per write or read,
toolkit.logger.debug(msg) logs. Each write/read must finish within 60 s; read() returns at most 3000 characters.
The agent answers each question from read()'s output alone; answers are scored by token F1."""

FORMAT = """Reply with one line "COMMIT_MESSAGE: <what you changed and why, one sentence>", then ONE patch
in V4A format that edits program.py:
*** Begin Patch
*** Update File: program.py
@@ <a line of the program just above the change, e.g. def read(self, query: Query) -> str:>
 <unchanged line, prefixed by one space>
-<line to remove, prefixed by ->
+<line to add, prefixed by +>
*** End Patch
Copy context lines exactly, with their indentation after the one-character prefix. Make one focused change."""


def _case(case: Case, label: str) -> str:
    lines = [f"{label}: score {case.score:.2f}", f"  question: {case.question}", f"  expected: {case.expected}",
             f"  answered: {case.prediction or '(nothing)'}"]
    if case.query is not None:
        lines.append(f"  query filled by the agent: {json.dumps(case.query, ensure_ascii=False)}")
    if case.error:
        lines.append(f"  read() failed: {case.error}")
    lines.append("  read() returned:\n" + ("\n".join("    " + l for l in case.context.splitlines()) or "    (empty)"))
    return "\n".join(lines)


def _lineage(request: ReflectionRequest) -> str:
    if not request.lineage:
        return "(no history yet)"
    lines = []
    for entry in request.lineage:
        if entry.score is None:
            outcome = f"discarded ({entry.note})" if entry.note else "discarded"
        else:
            delta = "" if entry.delta is None else f", {entry.delta:+.3f}"
            regression = " REGRESSION" if entry.delta is not None and entry.delta < 0 else ""
            outcome = f"score {entry.score:.3f}{delta}{regression}"
        lines.append(f"- [{entry.relation}] {entry.commit_message or '(no message)'}: {outcome}")
    return "\n".join(lines)


def _constraints(request: ReflectionRequest) -> str:
    if request.frozen_code:
        return "\nChange ONLY the four instruction constants; the code must stay exactly as it is."
    if request.frozen_instructions:
        return "\nDo NOT change the four instruction constants; change only the code."
    return ""


def reflection_messages(request: ReflectionRequest) -> list[dict[str, str]]:
    parts = [f"The current program (static score {request.parent_score:.3f}):\n```python\n{request.parent_source}\n```"]
    if request.kind == "runtime_fix":
        parts.append(f"This program broke the contract while running, so it scored 0:\n{request.violation}\n"
                     "Fix that problem and nothing else.")
    else:
        parts.append("History of this line of programs and children already tried from it:\n" + _lineage(request))
        for i, case in enumerate(request.failures, 1):
            parts.append(_case(case, f"Failed case {i}"))
        if request.success is not None:
            parts.append(_case(request.success, "A case that worked"))
        if request.write_example is not None:
            example = request.write_example
            parts.append(f"What write() received for one raw text:\n  raw_text: {example.get('raw_text', '')}\n"
                         f"  item: {json.dumps(example.get('item'), ensure_ascii=False)}")
        parts.append("Find why the failed cases failed (storage, retrieval, or answering) and change the program "
                     "so that questions like them are answered; avoid repeating changes that regressed.")
    parts.append(FORMAT + _constraints(request))
    return [
        {"role": "system", "content": SYSTEM.format(imports=", ".join(sorted(ALLOWED_IMPORTS)))},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def repair_messages(messages: list[dict[str, str]], reply: str, error: str, attempt: int, limit: int) -> list[dict[str, str]]:
    return messages + [
        {"role": "assistant", "content": reply},
        {"role": "user", "content": f"Attempt {attempt} of {limit} failed:\n{error}\n\nReply again with a "
                                    "COMMIT_MESSAGE line and a corrected patch against the ORIGINAL program."},
    ]
