"""Read-only tools over a run directory, for a reflector that reads the run (``reflect.reading``): list the
programs with their scores, read one, its per-question results and failure traces with their stages, diff
two, search the history. Offered to the model as OpenAI tools (``TOOLS``), answered by ``RunReader.call``.

It sees what the one-shot reflector sees and more, never the answers of the questions that score a program:
no result of a static, confirmation or test question (nor of the cascade's slice, part of the static set) is
read, whatever the tool or its arguments (the split's ``scoring()`` ids and the row's split, both checked).
A program's score over them is shown, as the one-shot prompt shows its parent's. Every answer is cut to
``max_chars``; a bad call gets an error text, never an exception.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any
from collections.abc import Callable

from mstar_ray.runlog import layout
from mstar_ray.runlog.reader import read_rows
from mstar_ray.runlog.schemas import CandidateRow, ResultRow
from mstar_ray.runlog.sources import load_source
from mstar_ray.search.split import Split

HIDDEN_SPLITS = frozenset({"static", "screen", "confirmation", "test"})
MAX_LISTED = 40
MAX_RESULTS = 12
MAX_HITS = 20


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


_ID = {"type": "string", "description": "a program id (from list_programs)"}
TOOLS: list[dict[str, Any]] = [
    _tool("list_programs", "The run's programs, best first: id, parent, origin, status, static score, commit message.",
          {"limit": {"type": "integer", "description": f"at most this many (default 20, at most {MAX_LISTED})"}}, []),
    _tool("read_program", "A program's whole source.", {"id": _ID}, ["id"]),
    _tool("results", "A program's per-question results on the questions a reflector may see: question, expected "
          "and produced answer, score, the stage where a failure went wrong, and its trace.",
          {"id": _ID, "failed_only": {"type": "boolean", "description": "only those scored below 1 (default true)"}},
          ["id"]),
    _tool("diff", "The unified diff from one program to another.", {"a": _ID, "b": _ID}, ["a", "b"]),
    _tool("search", "Programs whose source or commit message holds the text, with the matching lines.",
          {"text": {"type": "string"}}, ["text"]),
]


# The first line of each of ``results``' entries and each line of ``list_programs``, as a reader without a model
# (``reflect.offline.reader_stand_in``) reads them back: kept beside the code that writes them.
RESULT_HEADER = re.compile(r"^\[(?P<question_id>[^\]\n]+)\] \((?P<category>[^\n]*), split (?P<split>\S+)\) "
                           r"score (?P<score>[0-9.]+)(?:, failed at (?P<stage>\S+))?$", re.MULTILINE)
PROGRAM_LINE = re.compile(r"^(?P<id>\S+) parent=(?P<parent>\S+) origin=\S+ status=(?P<status>\S+) "
                          r"static=(?P<static>\S+) ", re.MULTILINE)


class RunReader:
    def __init__(self, run_dir: str | Path, *, max_chars: int = 4000):
        self.run_dir = Path(run_dir)
        self.max_chars = max_chars
        self.hidden = Split.model_validate_json((self.run_dir / layout.SPLIT).read_text()).scoring()
        self._candidates: list[CandidateRow] | None = None
        self._results: list[ResultRow] | None = None
        self.calls = 0

    def call(self, name: str, arguments: str) -> str:
        """The tool's answer as text (an error says what was wrong), cut to ``max_chars``."""
        self.calls += 1
        tools: dict[str, Callable[..., str]] = {"list_programs": self.list_programs, "read_program": self.read_program, "results": self.results,
                 "diff": self.diff, "search": self.search}
        if name not in tools:
            return f"error: no tool {name!r}; the tools are {', '.join(tools)}"
        try:
            args = json.loads(arguments or "{}")
            if not isinstance(args, dict):
                raise ValueError("the arguments are not a JSON object")
            text = tools[name](**args)
        except (TypeError, ValueError, KeyError, OSError) as exc:
            return f"error: {name}({arguments[:200]}): {exc}"
        return text if len(text) <= self.max_chars else text[: self.max_chars] + "\n[... cut]"

    # ------------------------------------------------------------------------------------------- the tools

    def list_programs(self, limit: int = 20) -> str:
        rows = sorted(self._rows(), key=lambda r: -(r.static_score if r.static_score is not None else -1.0))
        lines = [f"{r.id} parent={r.parent or '-'} origin={r.origin} status={r.status} "
                 f"static={'-' if r.static_score is None else f'{r.static_score:.3f}'} {r.commit_message[:120]!r}"
                 for r in rows[: max(1, min(int(limit), MAX_LISTED))]]
        return "\n".join(lines) or "no program has been logged yet"

    def read_program(self, id: str) -> str:  # noqa: A002 (the tool's argument name)
        self._known(id)
        return load_source(self.run_dir, id)

    def results(self, id: str, failed_only: bool = True) -> str:  # noqa: A002
        self._known(id)
        shown = [r for r in self._visible() if r.candidate == id and (r.score < 1.0 or not failed_only)]
        if not shown:
            return f"no {'failed ' if failed_only else ''}result of {id} on a question a reflector may see"
        return "\n\n".join(
            f"[{r.question_id}] ({r.category}, split {r.split}) score {r.score:.2f}"
            + (f", failed at {r.stage}" if r.stage else "") + f"\nquestion: {r.question}\nexpected: {r.expected}"
            f"\nproduced: {r.prediction}" + (f"\nerror: {r.error}" if r.error else "")
            + (f"\nwhat read() returned: {r.context[:600]}" if r.context else "")
            + (f"\ntrace: {r.trace[:800]}" if r.trace else "")
            for r in shown[:MAX_RESULTS])

    def diff(self, a: str, b: str) -> str:
        self._known(a)
        self._known(b)
        lines = difflib.unified_diff(load_source(self.run_dir, a).splitlines(True),
                                     load_source(self.run_dir, b).splitlines(True), a, b)
        return "".join(lines) or f"{a} and {b} are the same program"

    def search(self, text: str) -> str:
        needle = str(text).lower()
        if not needle.strip():
            raise ValueError("search needs some text")
        hits = []
        for row in self._rows():
            lines = [line.strip() for line in self._source(row.id).splitlines() if needle in line.lower()]
            if needle in row.commit_message.lower() or lines:
                score = "-" if row.static_score is None else f"{row.static_score:.3f}"
                hits.append(f"{row.id} (static {score}): "
                            f"{row.commit_message[:100]!r}" + "".join(f"\n    {line[:160]}" for line in lines[:3]))
        return "\n".join(hits[:MAX_HITS]) or f"no program holds {text!r}"

    # ------------------------------------------------------------------------------------------- reading

    def _rows(self) -> list[CandidateRow]:
        if self._candidates is None:
            rows = read_rows(self.run_dir, "candidates")
            self._candidates = [r for r in rows if r.status != "duplicate"]
        return self._candidates

    def _visible(self) -> list[ResultRow]:
        """The results a reflector may see: never a question that scores a program."""
        if self._results is None:
            rows = read_rows(self.run_dir, "results")
            self._results = [r for r in rows
                             if r.question_id not in self.hidden and r.split not in HIDDEN_SPLITS]
        return self._results

    def _known(self, pid: str) -> None:
        if not any(r.id == pid for r in self._rows()):
            raise KeyError(f"no program {pid!r} in this run (list_programs names them)")

    def _source(self, pid: str) -> str:
        try:
            return load_source(self.run_dir, pid)
        except (OSError, ValueError):
            return ""
