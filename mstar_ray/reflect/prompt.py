"""The reflector's prompts: the reflection itself (docs/design.md section 4) and the repair turn that sends a
failed attempt back with its full error.

A repair request always differs from the one before it (it carries the failed reply, its error and the
attempt number), so a cache keyed by the request can never replay the same failed answer.
"""

from __future__ import annotations

import json

from mstar_ray.sandbox.python_subset import ALLOWED_IMPORTS

from mstar_ray.reflect.edit_formats import REPAIR_ASK, EditFormat, instructions
from mstar_ray.reflect.guidance import SEED_GUIDANCE
from mstar_ray.reflect.request import ALREADY_EVALUATED, NO_CHANGE, Case, ReflectionRequest

# A conservative characters-per-token for code and English, to size a prompt for a short context.
CHARS_PER_TOKEN = 3.0

SYSTEM = """You improve the memory program of an LLM agent. The program is one Python file:
- @dataclass KnowledgeItem: the fields the agent extracts from each raw text (JSON-compatible types).
- @dataclass Query: the fields the agent fills from each question.
- class KnowledgeBase with __init__(self, toolkit), write(self, item, raw_text) -> None, read(self, query) -> str.
- String constants INSTRUCTION_KNOWLEDGE_ITEM (how to fill KnowledgeItem), INSTRUCTION_QUERY (how to fill
  Query), INSTRUCTION_RESPONSE (how to answer from read()'s text), ALWAYS_ON_KNOWLEDGE (always in the prompt).
Rules: imports only from {imports}; no eval/exec/open/__import__, no files, processes, threads or network.
toolkit.db is a SQLite connection, toolkit.chroma a ChromaDB client (collections embed documents
themselves), toolkit.llm_completion(messages) -> str (the contents go as one prompt of at most 32000
characters) may be called at most once per write or read, toolkit.logger.debug(msg) logs. Each write/read
must finish within 60 s; read() returns at most 3000 characters.
{task_brief}"""

# What each attributed stage means, for the reflector (mstar_ray.agent.attribution decides them).
STAGE_MEANING = {
    "answering": "the evidence reached read()'s output and the answer is still wrong",
    "retrieval": "the memory holds the evidence (a read asked for it brings it back) but read() did not return it",
    "storage": "the evidence was written but read() cannot bring it back even when asked for it: write() lost it",
    "not_written": "its evidence was not among the texts written in this evaluation: not the program's fault",
}


def _stages(counts: dict[str, int]) -> str:
    total = sum(counts.values())
    lines = [f"Where the memory failed, for the {total} failed items whose evidence is known:"]
    lines += [f"- {stage}: {counts[stage]} ({STAGE_MEANING.get(stage, stage)})" for stage in STAGE_MEANING if stage in counts]
    return "\n".join(lines)


def _case(case: Case, label: str) -> str:
    stage = f" (failed at {case.stage})" if case.stage else ""
    lines = [f"{label}: score {case.score:.2f}{stage}", f"  question: {case.question}", f"  expected: {case.expected}",
             f"  answered: {case.prediction or '(nothing)'}"]
    for evidence in case.missing_evidence:
        lines.append(f"  evidence missing from read()'s output: {evidence}")
    if case.query is not None:
        lines.append(f"  query filled by the agent: {json.dumps(case.query, ensure_ascii=False)}")
    if case.error:
        lines.append(f"  read() failed: {case.error}")
    lines.append("  read() returned:\n" + ("\n".join("    " + l for l in case.context.splitlines()) or "    (empty)"))
    if case.trace:
        lines.append("  what happened:\n" + "\n".join("    " + l for l in case.trace.splitlines()))
    return "\n".join(lines)


def _elsewhere(request: ReflectionRequest) -> str:
    """What the run learnt beyond this line: parts no change has moved, and gains found on other lines."""
    notes = []
    if request.inert_parts:
        notes.append(f"Across this run, every child that changed {', '.join(request.inert_parts)} scored exactly "
                     "what its parent scored: the failures do not come from there.")
    if request.relatives:
        notes.append("Programs of other lines gained over an ancestor they share with this one; the same change "
                     "may gain here too:\n" + "\n".join(
                         f"- #{r.id[:8]} (its last change: {r.commit_message or '(no message)'}): {r.gain:+.3f} over "
                         f"#{r.ancestor_id[:8]}" for r in request.relatives))
    return "\n".join(notes)


def _lineage(request: ReflectionRequest) -> str:
    elsewhere = _elsewhere(request)
    if not request.lineage:
        return elsewhere or "(no history yet)"
    lines = []
    for entry in request.lineage:
        if entry.score is None:
            outcome = "discarded" if entry.id == "-" else "not evaluated"
        else:
            delta = "" if entry.delta is None else f", {entry.delta:+.3f}"
            regression = " REGRESSION" if entry.delta is not None and entry.delta < 0 else ""
            outcome = f"score {entry.score:.3f}{delta}{regression}"
        if entry.changed:
            outcome += f"; it changed {', '.join(entry.changed)}"
        if entry.note:
            outcome += f" ({entry.note})"
        lines.append(f"- [{entry.relation}] {entry.commit_message or '(no message)'}: {outcome}")
    tried = [e for e in request.lineage if e.relation == "child"]
    idle = sum(NO_CHANGE in e.note for e in tried)
    repeated = sum(ALREADY_EVALUATED in e.note for e in tried)
    if idle or repeated:
        lines.append(f"Of the {len(tried)} attempts already made on this program, {idle} changed nothing and "
                     f"{repeated} repeated a program already evaluated: make a change none of them made.")
    return "\n".join([*lines, elsewhere] if elsewhere else lines)


def _constraints(request: ReflectionRequest) -> str:
    if request.frozen_code:
        return "\nChange ONLY the four instruction constants; the code must stay exactly as it is."
    if request.frozen_instructions:
        return "\nDo NOT change the four instruction constants; change only the code."
    return ""


def reflection_messages(request: ReflectionRequest, edit_format: EditFormat = "v4a",
                        max_prompt_tokens: int | None = None) -> list[dict[str, str]]:
    """The reflection prompt. With ``max_prompt_tokens`` (a small model's context less its reply), the
    optional parts go, least useful first, until the prompt fits: the write example, the success case,
    failure cases beyond the first, the history, the last failure case."""
    system = SYSTEM.format(imports=", ".join(sorted(ALLOWED_IMPORTS)), task_brief=request.task_brief)
    head = f"The current program (static score {request.parent_score:.3f}):\n```python\n{request.parent_source}\n```"
    tail = instructions(edit_format, request.parent_source) + _constraints(request)
    if request.kind == "runtime_fix":
        body = [f"This program broke the contract while running, so it scored 0:\n{request.violation}\n"
                "Fix that problem and nothing else."]
        return _messages(system, [head, *body, tail])
    optional: list[tuple[str, str]] = [("history", "History of this line of programs and children already tried "
                                        "from it:\n" + _lineage(request))]
    if request.stage_counts:
        optional.append(("stages", _stages(request.stage_counts)))
    optional += [(f"failure {i}", _case(case, f"Failed case {i}")) for i, case in enumerate(request.failures, 1)]
    if request.success is not None:
        optional.append(("success", _case(request.success, "A case that worked")))
    if request.write_example is not None:
        example = request.write_example
        optional.append(("write example", f"What write() received for one raw text:\n  raw_text: "
                         f"{example.get('raw_text', '')}\n  item: {json.dumps(example.get('item'), ensure_ascii=False)}"))
    ask = request.guidance or SEED_GUIDANCE[0]  # an evolving instruction (search.guidance), or the fixed one
    drop_order = ["write example", "success", *(f"failure {i}" for i in range(len(request.failures), 1, -1)),
                  "stages", "history", "failure 1"]
    kept = dict(optional)
    while max_prompt_tokens is not None and _tokens(system, [head, *kept.values(), ask, tail]) > max_prompt_tokens:
        droppable = [name for name in drop_order if name in kept]
        if not droppable:
            break  # the program itself does not fit: the endpoint will refuse, and the parent is discarded
        del kept[droppable[0]]
    return _messages(system, [head, *kept.values(), ask, tail])


def _messages(system: str, parts: list[str]) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def _tokens(system: str, parts: list[str]) -> int:
    return int((len(system) + sum(len(p) + 2 for p in parts)) / CHARS_PER_TOKEN)


def repair_messages(messages: list[dict[str, str]], reply: str, error: str, attempt: int, limit: int,
                    edit_format: EditFormat = "v4a") -> list[dict[str, str]]:
    return messages + [
        {"role": "assistant", "content": reply},
        {"role": "user", "content": f"Attempt {attempt} of {limit} failed:\n{error}\n\nReply again with "
                                    f"{REPAIR_ASK[edit_format]}."},
    ]
