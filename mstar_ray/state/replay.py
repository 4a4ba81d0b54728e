"""The search's state rebuilt from its run directory: after a crash, a pre-empted node or a Ctrl-C (a resume),
and for ``status``, ``report`` and ``export``. Ray-free.

The logs are the source of truth: the population, the lineage each reflection prompt shows, every id
ever queued, the iteration counter, the counts behind the budgets and the money spent all come back from
``candidates``, ``events`` and ``llm_calls``. What was in flight is re-issued: candidates queued or being
evaluated (their sources are in ``programs/``, their lineage in the ``submitted`` event) and reflections
started without a child or a discard (re-made from the same iteration's seed). A candidate with a row in
``candidates`` is never evaluated again. Random streams need no saving: each is seeded by (run seed,
iteration).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from mstar_ray.llm.ledger import RoleUsage
from mstar_ray.program_ast import changed_pieces
from mstar_ray.reflect.request import LineageEntry
from mstar_ray.results import QuestionResult
from mstar_ray.runlog.reader import read_rows
from mstar_ray.runlog.sources import load_source
from mstar_ray.search.population import Member
from mstar_ray.state.candidate import Candidate


@dataclass
class Restored:
    members: list[Member] = field(default_factory=list)
    children_tried: dict[str, list[LineageEntry]] = field(default_factory=dict)  # by parent: its lineage notes
    seen: set[str] = field(default_factory=set)
    queue: list[Candidate] = field(default_factory=list)  # sources filled in
    reflections: list[int] = field(default_factory=list)  # in flight when the run stopped: re-issue, in order
    iterations: int = 0
    evaluated: int = 0
    discarded: int = 0
    violations: int = 0
    duplicates: int = 0
    crashes: dict[str, int] = field(default_factory=dict)  # evaluator deaths per candidate ("retried" events)
    usage: dict[str, RoleUsage] = field(default_factory=dict)
    wall_s: float = 0.0  # the run's processes so far, each from its first logged event to its last


def restore(run_dir: Path) -> Restored:
    state = Restored()
    candidates = {row.id: row for row in read_rows(run_dir, "candidates") if row.status != "duplicate"}
    results: dict[str, list[QuestionResult]] = {}
    for row in read_rows(run_dir, "results"):
        if row.split in ("static", "rotating"):
            results.setdefault(row.candidate, []).append(QuestionResult(
                id=row.question_id, category=row.category, question=row.question, expected=row.expected,
                prediction=row.prediction, score=row.score, judge=row.judge, query=json.loads(row.query) or None,
                context=row.context, error=row.error, seconds=row.latency_s))
    scores = {cid: row.static_score or 0.0 for cid, row in candidates.items() if row.status == "evaluated"}
    queued: dict[str, Candidate] = {}
    finished_reflections: set[int] = set()
    for row in read_rows(run_dir, "candidates"):
        if row.status == "duplicate" and row.origin not in ("seed", "runtime-fix"):
            finished_reflections.add(row.iteration)
            state.duplicates += 1
    events = read_rows(run_dir, "events")
    state.wall_s = wall_seconds(events)
    for event in events:
        if event.kind == "submitted" and event.candidate:
            meta = json.loads(event.detail or "{}")
            state.seen.add(event.candidate)
            # the detail is what RunDir.write_queued wrote: the candidate's log fields and its fix round
            queued[event.candidate] = Candidate(id=event.candidate, source="", iteration=event.iteration or 0, **meta)
            if meta["origin"] not in ("seed", "runtime-fix"):
                finished_reflections.add(event.iteration or 0)
        elif event.kind == "started" and (event.detail or "").startswith("reflection (improve)"):
            state.iterations = max(state.iterations, event.iteration or 0)
        elif event.kind == "discarded":
            detail = json.loads(event.detail or "{}")
            state.discarded += 1
            if detail.get("kind") == "improve":
                finished_reflections.add(event.iteration or 0)
            errors = detail.get("errors") or []
            state.children_tried.setdefault(detail["parent"], []).append(LineageEntry(
                id="-", relation="child", commit_message="(no valid child)",
                note=errors[-1][:200] if errors else detail.get("reason", "")))
        elif event.kind == "retried" and event.candidate:
            state.crashes[event.candidate] = state.crashes.get(event.candidate, 0) + 1
        elif event.candidate in candidates and (event.kind == "failed" or (
                event.kind == "finished" and (event.detail or "").startswith("static"))):
            # a search evaluation ("static ...") or one that failed; not a test, a confirmation or the final selection
            _restore_candidate(state, candidates[event.candidate], scores, results, run_dir)
    state.queue = [q for cid, q in queued.items() if cid not in candidates]
    for item in state.queue:
        item.source = load_source(run_dir, item.id)
    state.reflections = [i for i in range(1, state.iterations + 1) if i not in finished_reflections]
    for call in read_rows(run_dir, "llm_calls"):
        if not call.cache_hit:
            usage = state.usage.setdefault(call.role, RoleUsage())
            usage.calls += 1
            usage.prompt_tokens += call.prompt_tokens
            usage.completion_tokens += call.completion_tokens
            usage.cost_usd += call.cost_usd
    return state


def wall_seconds(events) -> float:
    """The wall time of the processes that wrote ``events``: a ``resumed`` event starts a new process, and
    each process counts from its first event to its last (a killed process's time after its last event is
    not known)."""
    total, first, last = 0.0, None, None
    for event in sorted(events, key=lambda e: e.at):
        if first is None:
            first = event.at
        elif event.kind == "resumed":
            total += (last - first).total_seconds()
            first = event.at
        last = event.at
    return total + ((last - first).total_seconds() if first is not None else 0.0)


def _restore_candidate(state: Restored, row, scores, results, run_dir: Path) -> None:
    """One finished evaluation, replayed in the order the live run saw it."""
    if row.origin != "seed":
        state.evaluated += 1
    parent_score = scores.get(row.parent) if row.parent else None
    if row.status == "failed":
        if row.parent is not None:
            state.children_tried.setdefault(row.parent, []).append(LineageEntry(
                id=row.id, relation="child", commit_message=row.commit_message,
                note=f"evaluation failed: {(row.violation_message or '')[:200]}"))
        return
    if row.status == "violation":
        state.violations += 1
        if row.parent is not None:
            state.children_tried.setdefault(row.parent, []).append(LineageEntry(
                id=row.id, relation="child", commit_message=row.commit_message, score=0.0,
                delta=-(parent_score or 0.0), note=f"runtime violation: {row.violation_kind}"))
        return
    member = Member(id=row.id, source=load_source(run_dir, row.id), parent=row.parent, origin=row.origin,
                    commit_message=row.commit_message, iteration=row.iteration, score=row.static_score or 0.0,
                    results=results.get(row.id, []),
                    write_example=json.loads(row.write_example) if row.write_example else None)
    state.members.append(member)
    if row.parent is not None and parent_score is not None:
        state.children_tried.setdefault(row.parent, []).append(LineageEntry(
            id=row.id, relation="child", commit_message=row.commit_message, score=member.score,
            delta=member.score - parent_score, changed=changed_pieces(load_source(run_dir, row.parent), member.source)))
