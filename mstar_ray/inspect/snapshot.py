"""A run as data: what the live page (``mstar-ray serve``) and the report draw, read from the run's logs as they
are at this moment (the reconstruction ``status`` and a resume use). One function per view, each returning plain
JSON-able values; candidate text is carried as it was written and escaped where it is shown (``views.js`` sets
text, never markup)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from mstar_ray.inspect.figures import cache_text, score_text
from mstar_ray.inspect.status import chosen, driver_alive, metrics, run_config_of
from mstar_ray.results import stage_totals
from mstar_ray.runlog import layout
from mstar_ray.runlog.reader import read_rows
from mstar_ray.runlog.schemas import CandidateRow
from mstar_ray.state.replay import restore
from mstar_ray.state.search_state import SearchState

# the files whose change calls for reading the run again (what is in flight and whether the driver lives are read
# on every request: ``live``)
WATCHED = ("candidates.arrows", layout.SUMMARY, layout.STRUCTURE)


def version(run_dir: Path) -> str:
    """Changes whenever a watched file grows, is rewritten or appears."""
    parts = []
    for name in WATCHED:
        try:
            stat = (run_dir / name).stat()
            parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
        except FileNotFoundError:
            parts.append(f"{name}:-")
    return str(hash("|".join(parts)) & 0xFFFFFFFFFFFF)


def phase(run_dir: Path) -> str:
    if driver_alive(run_dir):
        return "running"
    return "finished" if (run_dir / layout.SUMMARY).exists() else "interrupted"


def _candidate(n: int, row: CandidateRow) -> dict[str, Any]:
    interval = ([row.static_low, row.static_high] if row.static_low is not None and row.static_high is not None
                else None)  # the two bounds are written together
    return {"n": n, "id": row.id, "parent": row.parent, "origin": row.origin, "message": row.commit_message,
            "status": row.status, "score": row.static_score, "interval": interval,
            "score_text": score_text(row.static_score, interval), "verdict": row.verdict,
            "violation": row.violation_message, "node": row.node_id[:8], "cost_usd": row.cost_usd,
            "seconds": row.wall_seconds}


def candidates(rows: list[CandidateRow]) -> list[dict[str, Any]]:
    """Every candidate fully evaluated (or found in violation, or failed), in the order evaluated, numbered from 1."""
    shown = [r for r in rows if r.status not in ("duplicate", "screened_out")]
    return [_candidate(n, row) for n, row in enumerate(shown, 1)]


def best_line(shown: list[dict[str, Any]], returned: str | None, finished: bool) -> list[dict[str, Any]]:
    """What the run would return after each candidate: the incumbent (replaced only beyond the noise), and at the
    end of a finished run the program it did return (confirmation may pick a contender over the incumbent)."""
    line, current = [], None
    for entry in shown:
        if entry["verdict"] == "replaces":
            current = entry
        if current is not None:
            line.append({"n": entry["n"], "id": current["id"], "score": current["score"]})
    if finished and returned is not None and line and line[-1]["id"] != returned:
        chosen_entry = next((e for e in shown if e["id"] == returned), None)
        if chosen_entry is not None:
            line.append({"n": line[-1]["n"], "id": returned, "score": chosen_entry["score"]})
    return line


def progress(run_dir: Path, state: SearchState, target: int | None, run_phase: str) -> dict[str, Any]:
    return {"phase": run_phase, "evaluated": state.evaluated, "target": target, "discarded": state.discarded,
            "violations": state.violations, "duplicates": state.duplicates, "screened_out": state.screened_out,
            "reflections": state.iterations,
            "queued": len(state.queue) if run_phase != "finished" else 0,
            "reflecting": len(state.reflections) if run_phase != "finished" else 0}


def in_flight(run_dir: Path, run_phase: str) -> list[dict[str, Any]]:
    """The evaluations in flight as the driver last wrote them (``live.json``); none once it has stopped."""
    path = run_dir / layout.LIVE
    if run_phase != "running" or not path.exists():
        return []
    try:
        return list(json.loads(path.read_text()).get("evaluations", []))
    except (OSError, ValueError):  # rewritten as we read: the next poll has it whole
        return []


def nodes(rows: list[CandidateRow], flying: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each node that evaluated a candidate: how many, and the last it finished."""
    count = Counter(r.node_id[:8] for r in rows if r.node_id)
    last = {r.node_id[:8]: r.finished_at.isoformat(timespec="seconds") for r in rows if r.node_id}
    return [{"node": node, "evaluations": n, "last": last[node]} for node, n in count.most_common()]


def failures(state: SearchState, returned: str | None) -> list[dict[str, Any]]:
    """Attributed failures by stage of the returned program and of the best seed."""
    members = {m.id: m for m in state.members}
    seeds = [m for m in state.members if m.origin == "seed"]
    shown = [("returned", members.get(returned))] if returned in members else []
    if seeds:
        seed = max(seeds, key=lambda m: m.score)
        if seed.id != returned:
            shown.append(("best seed", seed))
    return [{"label": label, "id": m.id, "stages": stage_totals(m.results)} for label, m in shown if m is not None]


def cost(state: SearchState, rows: list[CandidateRow]) -> dict[str, Any]:
    """Spend and tokens (the usage a resume restores) and the evaluations' model and embedding requests answered
    from the run's cache (as the live line counts them), with the sentence every view prints."""
    hits, requests = sum(r.cache_hits for r in rows), sum(r.requests for r in rows)
    return {"usd": sum(u.cost_usd for u in state.usage.values()),
            "tokens": sum(u.prompt_tokens + u.completion_tokens for u in state.usage.values()),
            "requests": requests, "cache_hits": hits, "cache_text": cache_text(hits, requests)}


def live(run_dir: Path, snap: dict[str, Any]) -> dict[str, Any]:
    """``snap`` with what changes between its rebuilds brought up to date: whether the driver lives and what it has
    in flight; ``version`` changes when anything shown does."""
    run_phase = phase(run_dir)
    flying = in_flight(run_dir, run_phase)
    progress = {**snap["progress"], "phase": run_phase}
    mark = abs(hash(json.dumps([run_phase, flying], sort_keys=True))) & 0xFFFFFF
    return {**snap, "progress": progress, "in_flight": flying, "version": f"{snap['version']}-{mark}"}


def run_snapshot(run_dir: Path, state: SearchState | None = None) -> dict[str, Any]:
    """Everything the page shows, as of now; ``state``: the run's, restored already by the caller."""
    config = run_config_of(run_dir)
    run_phase = phase(run_dir)
    state = restore(run_dir) if state is None else state
    rows = read_rows(run_dir, "candidates")
    summary = json.loads((run_dir / layout.SUMMARY).read_text()) if (run_dir / layout.SUMMARY).exists() else None
    shown = candidates(rows)
    returned: dict[str, Any] | None = None
    seed_best: dict[str, Any] | None = None
    if state.members:
        best, incumbent = chosen(run_dir, state)
        returned = {"id": best.id, "origin": best.origin, "message": best.commit_message, "score": best.score,
                    "score_text": score_text(best.score, incumbent.interval(best)), "final": summary is not None}
        seeds = [m for m in state.members if m.origin == "seed"]
        if seeds:
            top = max(seeds, key=lambda m: m.score)
            seed_best = {"id": top.id, "message": top.commit_message,
                         "score_text": score_text(top.score, incumbent.interval(top))}
    if summary is not None:
        for key, member in (("returned", summary["best"]), ("seed", summary["best_seed"])):
            target = returned if key == "returned" else seed_best
            if target is not None and member.get("test_score") is not None:
                target["test_text"] = score_text(member["test_score"], member.get("test_interval"))
    flying = in_flight(run_dir, run_phase)
    return {
        "run": str(run_dir), "task": config.task.name, "reflector": config.search.reflector,
        "metrics": metrics(run_dir), "progress": progress(run_dir, state, config.search.max_candidates, run_phase),
        "returned": returned, "best_seed": seed_best, "candidates": shown,
        "best_line": best_line(shown, returned["id"] if returned else None, summary is not None),
        "failures": failures(state, returned["id"] if returned else None), "cost": cost(state, rows),
        "in_flight": flying, "nodes": nodes(rows, flying),
        "stopped": summary["stop_reason"] if summary else None,
        "selection": summary.get("selection") if summary else None,
        "version": version(run_dir),
    }


def change(run_dir: Path, candidate: str) -> dict[str, Any] | None:
    """One child against its parent, the reflector's message beside it (None for an unknown id)."""
    from mstar_ray.inspect.code_view import diff_lines
    from mstar_ray.runlog.sources import load_source

    row = next((r for r in read_rows(run_dir, "candidates") if r.id == candidate), None)
    if row is None:
        return None
    try:
        after = load_source(run_dir, row.id)
        before = load_source(run_dir, row.parent) if row.parent else None
    except (OSError, ValueError):
        return {"id": row.id, "parent": row.parent, "message": row.commit_message, "lines": None}
    lines = (diff_lines(before, after, f"{row.parent}.py", f"{row.id}.py") if before is not None
             else [("ctx", line) for line in after.splitlines()])
    return {"id": row.id, "parent": row.parent, "message": row.commit_message, "lines": lines}
