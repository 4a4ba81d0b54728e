"""``mstar-ray status RUN_DIR``: progress, best, cost and what is in flight, read from the logs (the
same reconstruction a resume uses), whether the driver is running, finished or was interrupted."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from mstar_ray.exit_codes import InputError
from mstar_ray.inspect.figures import cache_text, plural, score_text, shortened
from mstar_ray.run_config import RunConfig
from mstar_ray.runlog import layout
from mstar_ray.runlog.live import InFlight
from mstar_ray.runlog.reader import read_rows
from mstar_ray.runlog.schemas import LLMCallRow
from mstar_ray.results import stage_totals
from mstar_ray.search.population import Member
from mstar_ray.search.selection import Incumbent, replay
from mstar_ray.search.split import Split
from mstar_ray.serve.replicas import ReplicaRecord
from mstar_ray.state.reflector_yield import run_arms, yield_lines
from mstar_ray.state.replay import restore
from mstar_ray.state.search_state import SearchState
from mstar_ray.terminal import printable


def driver_alive(run_dir: Path) -> bool:
    """A live driver holds an exclusive lock on its event log (``LogWriter``); try to take it."""
    path = layout.log_path(run_dir, "events")
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def run_config_of(run_dir: Path) -> RunConfig:
    layout.require_run_dir(run_dir)
    import yaml

    return RunConfig.model_validate(yaml.safe_load((run_dir / layout.CONFIG).read_text()))


def tested(summary: dict[str, Any], separator: str) -> str:
    """The test scores of the best program and the best seed, with each category's (seen and unseen games, a
    benchmark's themes) when the summary has them."""
    def one(member: dict[str, Any]) -> str:
        categories = member.get("test_categories") or {}
        shown = ", ".join(f"{c} {score:.3f}" for c, score in sorted(categories.items()))
        return score_text(member.get("test_score"), member.get("test_interval")) + (f" ({shown})" if len(categories) > 1
                                                                                     else "")
    return f"best {one(summary['best'])}{separator}best seed {one(summary['best_seed'])}"


def chosen(run_dir: Path, state: SearchState) -> tuple[Member, Incumbent]:
    """The program the run returns (summary.json's once finished, else the incumbent so far) and the
    incumbent replayed from the logs, which gives every static score's interval."""
    config = run_config_of(run_dir)
    split = Split.model_validate_json((run_dir / layout.SPLIT).read_text())
    incumbent = replay(state.members, split.static, seed=config.search.seed)
    summary_path = run_dir / layout.SUMMARY
    if summary_path.exists():
        best_id = json.loads(summary_path.read_text())["best"]["id"]
        return next(m for m in state.members if m.id == best_id), incumbent
    if incumbent.best is None:
        raise InputError(f"{run_dir}: no program has been evaluated yet")
    return incumbent.best, incumbent


def metrics(run_dir: Path) -> list[str]:
    """What the run's scores are, as its evaluations reported it (one text, unless a resume changed the judge);
    a stand-in grader names itself there."""
    return sorted({row.metric for row in read_rows(run_dir, "candidates") if row.metric})


def _scored(member: Member, incumbent: Incumbent) -> str:
    return score_text(member.score, incumbent.interval(member))


def described(member: Member) -> str:
    """Where a program came from and what it changed: a seed's message names it already."""
    message = printable(shortened(member.commit_message, 160), lines=False)
    return message if member.origin == "seed" else f"{member.origin}: {message}"


def _live_lines(run_dir: Path) -> list[str]:
    path = run_dir / layout.LIVE
    if not path.exists():
        return []
    live = json.loads(path.read_text())
    lines = [f"evaluating {InFlight.model_validate(e).describe()}" for e in live.get("evaluations", [])]
    if live.get("nodes"):  # the cluster's worker nodes, as the driver last saw them
        waiting = live.get("waiting_for_node", 0)
        lines.append(f"nodes: {live['nodes']}" + (f"; {waiting} evaluations waiting for a node" if waiting else ""))
    return lines


def _memory_line(run_dir: Path) -> str | None:
    split = Split.model_validate_json((run_dir / layout.SPLIT).read_text())
    if split.static_evidence is None:
        return f"memory    {len(split.train_texts)} texts written per search evaluation (the task places no evidence)"
    return (f"memory    {len(split.train_texts)} texts written per search evaluation (plus the rotating questions' "
            f"evidence), holding {split.static_evidence:.0%} of the static questions' evidence")


def _serving_lines(run_dir: Path, calls: list[LLMCallRow]) -> list[str]:
    """Each served model's replicas from the events log: where each ran, how long it took to start, how many
    calls it answered (``llm_calls.served_by``), and whether it is healthy, was lost mid-run or shut down."""
    replicas: dict[str, tuple[str, ReplicaRecord]] = {}  # by replica id: its last event's kind, its record
    for event in read_rows(run_dir, "events"):
        if event.work == "replica" and event.data:
            record = ReplicaRecord.model_validate_json(event.data)
            first = replicas.get(record.replica_id, (None, record))[1]
            replicas[record.replica_id] = (event.kind, first if first.ready_s is not None else record)
    answered: dict[str, int] = {}
    for call in calls:
        if call.served_by:
            answered[call.served_by] = answered.get(call.served_by, 0) + 1
    state = {"started": "healthy", "failed": "lost mid-run", "finished": "shut down"}
    lines = []
    for app in sorted({record.app for _, record in replicas.values()}):
        mine = [(kind, r) for kind, r in replicas.values() if r.app == app]
        counts = {state[kind]: sum(k == kind for k, _ in mine) for kind in state}
        shown = ", ".join(f"{n} {what}" for what, n in counts.items() if n)
        lines.append(f"serving   {app}: {len(mine)} replicas ({shown}; Serve restarts a lost one)"
                     if counts["lost mid-run"] else f"serving   {app}: {len(mine)} replicas ({shown})")
        for kind, r in sorted(mine, key=lambda item: item[1].started_at):
            took = "kept from an earlier run" if r.reused else (f"up in {r.ready_s:.1f} s" if r.ready_s is not None else "")
            lines.append(f"          replica {r.replica_id} on node {r.node_id[:8]} ({r.node_ip}) {took}, "
                         f"{answered.get(r.replica_id, 0)} calls answered, {state.get(kind, kind)}")
    return lines


def status_text(run_dir: Path) -> str:
    config = run_config_of(run_dir)
    state = restore(run_dir)
    summary_path = run_dir / layout.SUMMARY
    alive = driver_alive(run_dir)
    phase = ("running" if alive else "finished" if summary_path.exists()
             else f"interrupted; resume it with mstar-ray run --resume {run_dir}")
    target = config.search.max_candidates
    lines = [f"run       {run_dir} ({phase})",
             f"task      {config.task.name} · reflector {config.search.reflector} · R={config.search.reflections_in_flight} "
             f"E={config.search.evaluations_in_flight}",
             *(f"scored by {metric}" for metric in metrics(run_dir)),
             f"progress  {state.evaluated}{f'/{target}' if target else ''} candidates evaluated · {state.discarded} "
             f"discarded · {plural(state.violations, 'violation')} · {plural(state.duplicates, 'duplicate')} · "
             f"{plural(state.iterations, 'reflection')} started"]
    if config.search.cascade is not None:
        lines.append(f"cascade   {state.screened_out} of {state.evaluated} children screened out after the slice "
                     f"(rule {config.search.cascade.rule}); {len(state.screen_scores)} programs screened")
    if alive or not summary_path.exists():
        lines.append(f"in flight {plural(len(state.queue), 'candidate')} queued or evaluating · "
                     f"{plural(len(state.reflections), 'reflection')}")
    if alive:
        lines += _live_lines(run_dir)
    memory = _memory_line(run_dir) if (run_dir / layout.SPLIT).exists() else None
    if memory:
        lines.append(memory)
    if state.members:
        best, incumbent = chosen(run_dir, state)
        seeds = [m for m in state.members if m.origin == "seed"]
        lines.append(f"{'returned' if summary_path.exists() else 'best':<10}{_scored(best, incumbent)} {best.id} "
                     f"({described(best)})")
        top = max(state.members, key=lambda m: m.score)
        if top.score > best.score:
            lines.append(f"highest   {_scored(top, incumbent)} {top.id}: not better than the best beyond the noise")
        if seeds:
            seed = max(seeds, key=lambda m: m.score)
            lines.append(f"seeds     best {_scored(seed, incumbent)} {seed.id} ({described(seed)})")
        for label, member in (("best", best), *((("best seed", seed),) if seeds and seed.id != best.id else ())):
            stages = stage_totals(member.results)
            if stages:
                lines.append(f"failures  {label}: " + " · ".join(f"{n} {stage.replace('_', ' ')}" for stage, n in stages.items())
                             + " (where its failed static and rotating items went wrong)")
    calls = read_rows(run_dir, "llm_calls")
    cost = sum(u.cost_usd for u in state.usage.values())
    tokens = sum(u.prompt_tokens + u.completion_tokens for u in state.usage.values())
    rows = read_rows(run_dir, "candidates")
    cached = cache_text(sum(r.cache_hits for r in rows), sum(r.requests for r in rows))
    oracle = [c for c in calls if c.step.startswith("oracle_") and not c.cache_hit]
    lines.append(f"cost      ${cost:.4f}, {plural(tokens, 'token')}; {cached}"
                 + (f"; attribution's oracle reads ${sum(c.cost_usd for c in oracle):.4f} in {len(oracle)} requests"
                    if oracle else ""))
    if state.reflector_models:  # an ensemble of reflector models: what each spent and what its children brought
        lines += [f"reflector {line}" for line in yield_lines(run_arms(config, state))]
    lines += _serving_lines(run_dir, calls)
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        lines.append(f"test      {tested(summary, ' · ')} · stopped: {summary['stop_reason']}")
        if summary.get("selection"):
            lines.append(f"chosen by {summary['selection']['rule']}: {summary['selection']['how']}")
    return "\n".join(lines)


def best_source(run_dir: Path) -> tuple[str, str, float]:
    """(id, source, static score) of the program the run returns (so far)."""
    run_config_of(run_dir)
    state = restore(run_dir)
    if not state.members:
        raise InputError(f"{run_dir}: no program has been evaluated yet")
    best, _ = chosen(run_dir, state)
    return best.id, best.source, best.score
