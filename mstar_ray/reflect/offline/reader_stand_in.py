"""The offline stand-in of the reflector that reads the run (``search.reflector: offline-reader``): no model,
the offline reflector's edit choice (``reflect.offline``) made from what it reads through ``llm-reader``'s own
tools (``reflect.run_reader``), called as a model calls them and bounded by the same limits.

It reads, one tool call per turn: the parent's failed results with their stages (``results``), the run's
programs best first (``list_programs``), and for the best others, whether they differ from the parent
(``diff``) and, if so, their source (``read_program``) as crossover donors. The failures it read (beside the
request's own sample) and their stages (in place of the request's counts) choose the edit; a donor the character limit cut is not used. It
sees only what the tools show: never a result of a question that scores a program (the reader's guard).
With no run directory reachable it is the offline reflector."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import ClassVar

from mstar_ray.llm.settings import ReflectorConfig
from mstar_ray.reflect.base import ReflectorSetup
from mstar_ray.reflect.offline.guided import OfflineReflector
from mstar_ray.reflect.prompt import CHARS_PER_TOKEN
from mstar_ray.reflect.reflector import Child, Discard, SmokeTest
from mstar_ray.reflect.request import Case, ReflectionRequest
from mstar_ray.reflect.run_reader import PROGRAM_LINE, RESULT_HEADER, RunReader

CUT = "\n[... cut]"


def read_cases(text: str) -> list[Case]:
    """The failures a ``results`` answer shows, with their stages (an entry the cut left incomplete is skipped)."""
    heads = list(RESULT_HEADER.finditer(text))
    cases = []
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end(): after.start() if after else len(text)]
        fields = {}
        for line in body.splitlines():
            key, sep, value = line.partition(": ")
            if sep and key in ("question", "expected", "produced") and key not in fields:
                fields[key] = value
        if len(fields) == 3:
            cases.append(Case(question=fields["question"], expected=fields["expected"], prediction=fields["produced"],
                              score=float(head["score"]), stage=head["stage"]))
    return cases


class OfflineReadingReflector(OfflineReflector):
    name: ClassVar[str] = "offline-reader"

    @classmethod
    def make(cls, setup: ReflectorSetup) -> OfflineReadingReflector:
        # llm-reader's limits: those of a configured reflector endpoint, else their defaults
        configs = setup.settings.reflectors()
        limits = {k: getattr(configs[0], k) if configs else ReflectorConfig.model_fields[k].default
                  for k in ("max_turns", "max_read_tokens", "tool_result_chars")}
        return cls(max_repairs=setup.max_repairs, run_dir=setup.run_dir, **limits)

    def __init__(self, *, max_repairs: int = 3, run_dir: str | Path | None = None, max_turns: int = 6,
                 max_read_tokens: int = 60000, tool_result_chars: int = 4000):
        super().__init__(max_repairs=max_repairs)
        self.run_dir = Path(run_dir) if run_dir and Path(run_dir).is_dir() else None
        self.max_turns, self.max_read_tokens, self.tool_result_chars = max_turns, max_read_tokens, tool_result_chars
        self.last_reader: RunReader | None = None  # the last reflection's reader (its count of tool calls)
        self.last_read: list[tuple[str, str]] = []  # the last reflection's tool calls: (name, its answer)

    def reflect(self, request: ReflectionRequest, smoke: SmokeTest) -> Child | Discard:
        if self.run_dir is not None and request.kind == "improve":
            request = self._read(request)  # once per reflection: its repair attempts choose from the same reading
        return super().reflect(request, smoke)

    def _read(self, request: ReflectionRequest) -> ReflectionRequest:
        """``request`` with what the tools showed added: the failures read and their stages, the donors read."""
        assert self.run_dir is not None, "read only with a run directory"  # reflect() checks it
        reader = self.last_reader = RunReader(self.run_dir, max_chars=self.tool_result_chars)
        self.last_read = []
        budget = self.max_read_tokens * CHARS_PER_TOKEN

        def call(name: str, **args: str | int) -> str | None:
            if len(self.last_read) >= self.max_turns or sum(len(t) for _, t in self.last_read) >= budget:
                return None
            text = reader.call(name, json.dumps(args))
            self.last_read.append((name, text))
            return text

        cases = read_cases(call("results", id=request.parent_id) or "")
        listed = call("list_programs", limit=10) or ""
        others = [m["id"] for m in PROGRAM_LINE.finditer(listed) if m["id"] != request.parent_id and m["static"] != "-"]
        donors = []
        for other in others:
            diff = call("diff", a=request.parent_id, b=other)
            if diff is None:
                break
            if diff.startswith(("error", f"{request.parent_id} and {other} are the same")):
                continue
            source = call("read_program", id=other)
            if source is None:
                break
            if not source.startswith("error") and not source.endswith(CUT):
                donors.append(source)
        seen = {c.question for c in request.failures}
        stages = Counter(c.stage for c in cases if c.stage)
        return request.model_copy(update={
            "failures": [*request.failures, *(c for c in cases if c.question not in seen)],
            "stage_counts": dict(stages) or request.stage_counts,
            "donors": [*request.donors, *(d for d in donors if d not in request.donors)]})
