"""``quote_evidence``: a ``read()`` that asks its toolkit model to answer asks it for the evidence instead.

The paper's LoCoMo programs split by what ``read()`` returns: those that hand the answer step evidence ("return
only evidence snippets relevant to the query") score 0.41-0.49 with its model, those that ask the toolkit model
to answer inside ``read()`` ("Answer the query using only the records below") 0.16-0.39: an answer in read()
that misses leaves the answer step nothing to answer from, while evidence lets it answer itself
(``docs/concepts/offline.md``). This edit rewrites, in the string literals of ``read()`` and of the helpers it
calls, each sentence that asks for an answer (as the offline toolkit reads a prompt: ``asks_answer``) into one
that asks for the lines that bear on the query with their speaker and date. The rest of the prompt (its rules,
its fields, its records) stays as it was. An f-string's text is left alone: only plain literals are rewritten,
so no expression of the program moves.
"""

from __future__ import annotations

import ast
import io
import random
import re
import tokenize
from collections.abc import Collection

from mstar_ray.agent.offline.completions import asks_answer
from mstar_ray.contract import LOGIC_CLASS
from mstar_ray.reflect.offline.engine import (
    _Edit, Mutation, NoMutation, _apply, _methods, _module_class, _Source, _valid,
)
from mstar_ray.reflect.offline.engine import _Function

EVIDENCE_REQUEST = "Quote only the lines of the records that bear on the query, each with its speaker and date."
_SENTENCE = re.compile(r"[^.!?\n]*(?:[.!?]+|\n|$)")
# A sentence that already asks for evidence ("return only evidence snippets ..., strongest answer span first").
_ALREADY_EVIDENCE = re.compile(r"\b(?:evidence (?:snippets?|lines?)|snippets|quote)\b", re.IGNORECASE)
_OPENS_ANSWER = re.compile(r"answer\b", re.IGNORECASE)
_PLAIN_STRING = re.compile(r"^[rRuU]?(?:'''|\"\"\"|'|\")", re.DOTALL)


def _reached(tree: ast.Module) -> list[_Function]:
    """read() and the methods and module functions it calls, directly or through one another."""
    cls = _module_class(tree, LOGIC_CLASS)
    methods = _methods(cls) if cls else {}
    functions = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    todo = [methods["read"]] if "read" in methods else []
    seen: list[_Function] = []
    while todo:
        fn = todo.pop()
        if fn in seen:
            continue
        seen.append(fn)
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                    and node.attr in methods:
                todo.append(methods[node.attr])
            elif isinstance(node, ast.Name) and node.id in functions:
                todo.append(functions[node.id])
    return seen


def _rewritten(value: str, asked: list[bool]) -> str | None:
    """``value`` with the first sentence that asks for an answer replaced by the request for evidence and any later
    one dropped (``asked`` carries whether the request is already written, across literals); None if none does."""
    out, changed = [], False
    for sentence in _SENTENCE.findall(value):
        text = sentence.strip()
        if text and asks_answer(text) and not (_ALREADY_EVIDENCE.search(text) and not _OPENS_ANSWER.match(text)):
            ending = "\n" if sentence.endswith("\n") else (" " if sentence.endswith(" ") else "")
            lead = sentence[: len(sentence) - len(sentence.lstrip())]
            out.append("" if asked[0] else lead + EVIDENCE_REQUEST + ending)
            asked[0] = changed = True
        else:
            out.append(sentence)
    return "".join(out) if changed else None


def quote_evidence(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Make ``read()``'s requests to its toolkit model ask for evidence instead of an answer."""
    parsed = _Source(source)
    spans = [(fn.lineno, fn.end_lineno or fn.lineno) for fn in _reached(parsed.tree)]
    if not spans:
        raise NoMutation("the program has no read()")
    edits: list[_Edit] = []
    asked = [False]
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.STRING or not _PLAIN_STRING.match(token.string):
            continue  # f-strings and bytes are left alone
        if not any(first <= token.start[0] <= last for first, last in spans):
            continue
        value = ast.literal_eval(token.string)
        new = _rewritten(value, asked) if isinstance(value, str) else None
        if new is None:
            continue
        start = parsed.offset(token.start[0], len(source.splitlines(keepends=True)[token.start[0] - 1]
                                                   .encode()[: token.start[1]].decode(errors="ignore").encode()))
        end = parsed.offset(token.end[0], len(source.splitlines(keepends=True)[token.end[0] - 1]
                                               .encode()[: token.end[1]].decode(errors="ignore").encode()))
        edits.append(_Edit(start, end, repr(new)))
    if not edits:
        raise NoMutation("read() asks its toolkit for no answer")
    child = _apply(source, edits)
    if not _valid(source, child, avoid):
        raise NoMutation("asking for evidence gives no new valid program")
    return Mutation("quote_evidence", f"read() asks its toolkit model for the evidence, not an answer, in {len(edits)} "
                    "prompt line(s): the answer step answers from what it is shown", child)
