"""The search's state rebuilt from its run directory: after a crash, a pre-empted node or a Ctrl-C (a resume),
and for ``status``, ``report`` and ``export``. Ray-free.

The logs are the source of truth. Every search transition the driver applied is an ``events`` row naming it,
with its data; replaying them in order through ``SearchState.apply`` gives back the population, the lineage
each reflection prompt shows, every id ever queued, the reflections open, the counts behind the budgets;
``llm_calls`` gives the money spent. A finished evaluation's transition is rebuilt from its ``candidates`` row
and its ``results`` (the rows are written before the event: a row whose event a crash cut off is replayed at
the end, so a candidate with a row is never evaluated again). What was in flight is re-issued by the driver:
the candidates still pending (sources in ``programs/``) and the reflections still open (each re-made from its
iteration's seed). Random streams need no saving: each is seeded by (run seed, iteration).
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from mstar_ray.llm.ledger import RoleUsage
from mstar_ray.results import ItemResult
from mstar_ray.runlog.reader import read_rows
from mstar_ray.runlog.schemas import CandidateRow
from mstar_ray.runlog.schemas import EventRow
from mstar_ray.runlog.sources import load_source
from mstar_ray.search.cascade import passes
from mstar_ray.state.candidate import Candidate
from mstar_ray.state.reflector_yield import book
from mstar_ray.state.search_state import SearchState
from mstar_ray.state.transitions import (
    Discarded, Duplicate, Evaluated, Failed, GuidanceRewritten, Queued, ReflectionStarted, Retried, Screened, Stopped,
    Transition, Violated,
)

# Transitions whose events row holds all of them (but a candidate's source). A screening that stopped its
# program also wrote the program's row (status screened_out), from which it is rebuilt if a crash cut off its event.
_WHOLE = {t.__name__: t for t in (Queued, ReflectionStarted, Screened, Duplicate, Discarded, Retried, Stopped,
                                   GuidanceRewritten)}
# Transitions rebuilt from the candidate's row in ``candidates`` (and its ``results``).
_FROM_ROW = {"Evaluated", "Violated", "Failed"}


def restore(run_dir: Path) -> SearchState:
    run_dir = Path(run_dir)
    state = SearchState()
    rows = {row.id: row for row in read_rows(run_dir, "candidates") if row.status != "duplicate"}
    results = _search_results(run_dir)
    events = read_rows(run_dir, "events")
    state.wall_s = wall_seconds(events)
    replayed: set[str] = set()
    for event in events:
        if event.transition in _WHOLE:
            transition = _whole(event.transition, json.loads(event.data or "{}"), run_dir)
            if isinstance(transition, Screened) and not transition.passed:
                replayed.add(transition.candidate.id)
            state.apply(transition)
        elif event.transition in _FROM_ROW and event.candidate in rows and event.candidate not in replayed:
            replayed.add(event.candidate)
            state.apply(_from_row(rows[event.candidate], results, run_dir))
    for cid, row in rows.items():  # written, but a crash cut off its event
        if cid not in replayed:
            state.apply(_from_row(row, results, run_dir))
    for candidate in state.pending.values():
        candidate.source = load_source(run_dir, candidate.id)
    state.usage, state.reflector_usage = _usage(run_dir)
    return state


def _whole(name: str, data: dict[str, Any], run_dir: Path) -> Transition:
    if isinstance(data.get("candidate"), dict):
        # A queued candidate's source is loaded only if it is still pending; a duplicate's is needed now.
        source = load_source(run_dir, data["candidate"]["id"]) if name == "Duplicate" else ""
        data["candidate"] = {**data["candidate"], "source": source}
    return _WHOLE[name].model_validate(data)


def _from_row(row: CandidateRow, results: dict[str, list[ItemResult]], run_dir: Path) -> Transition:
    fields = {name: getattr(row, name) for name in Candidate.model_fields if name != "source"}
    candidate = Candidate(**fields, source=load_source(run_dir, row.id) if row.status == "evaluated" else "")
    if row.status == "failed":
        return Failed(candidate=candidate, error=row.violation_message or "")
    if row.status == "screened_out":
        score = row.screen_score or 0.0  # screened out at or above its bar: it answered as its parent did
        return Screened(candidate=candidate, score=score, bar=row.screen_threshold, passed=False,
                        repeats_parent=passes(score, row.screen_threshold))
    if row.status == "violation":
        return Violated(candidate=candidate, kind=row.violation_kind or "error")
    return Evaluated(candidate=candidate, score=row.static_score or 0.0, results=results.get(row.id, []),
                     write_example=json.loads(row.write_example) if row.write_example else None,
                     tokens=row.prompt_tokens + row.completion_tokens)


def _search_results(run_dir: Path) -> dict[str, list[ItemResult]]:
    results: dict[str, list[ItemResult]] = {}
    for row in read_rows(run_dir, "results"):
        if row.split in ("static", "rotating"):
            results.setdefault(row.candidate, []).append(ItemResult(
                id=row.question_id, category=row.category, question=row.question, expected=row.expected,
                prediction=row.prediction, score=row.score, judge=row.judge, query=json.loads(row.query) or None,
                context=row.context, error=row.error, seconds=row.latency_s, trace=row.trace,
                stage=row.stage, missing=row.missing_evidence))
    return results


def _usage(run_dir: Path) -> tuple[dict[str, RoleUsage], dict[str, RoleUsage]]:
    """What the calls took by role, and the reflector's by model (an ensemble's spend per model)."""
    usage: dict[str, RoleUsage] = {}
    by_model: dict[str, RoleUsage] = {}
    for call in read_rows(run_dir, "llm_calls"):
        book(usage, call.role, call)
        if call.role == "reflector":
            book(by_model, call.model, call)
    return usage, by_model


def wall_seconds(events: Iterable[EventRow]) -> float:
    """The wall time of the processes that wrote ``events``: a ``resumed`` event starts a new process, and
    each process counts from its first event to its last (a killed process's time after its last event is
    not known)."""
    total = 0.0
    first: datetime | None = None
    last: datetime | None = None
    for event in sorted(events, key=lambda e: e.at):
        if first is None:
            first = event.at
        elif event.kind == "resumed" and last is not None:  # last is set whenever first is
            total += (last - first).total_seconds()
            first = event.at
        last = event.at
    return total + ((last - first).total_seconds() if first is not None and last is not None else 0.0)
