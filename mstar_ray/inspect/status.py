"""``mstar-ray status RUN_DIR``: progress, best, cost and what is in flight, read from the logs (the
same reconstruction a resume uses), whether the driver is running, finished or was interrupted."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from mstar_ray.driver.resume import restore
from mstar_ray.run_config import RunConfig
from mstar_ray.runlog import layout
from mstar_ray.runlog.reader import read_rows


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


def status_text(run_dir: Path) -> str:
    if not (run_dir / layout.CONFIG).is_file():
        raise FileNotFoundError(f"{run_dir} is not a run directory: no {layout.CONFIG}")
    import yaml

    config = RunConfig.model_validate(yaml.safe_load((run_dir / layout.CONFIG).read_text()))
    state = restore(run_dir)
    summary_path = run_dir / layout.SUMMARY
    alive = driver_alive(run_dir)
    phase = "running" if alive else "finished" if summary_path.exists() else "interrupted (resume with --resume)"
    target = config.search.max_candidates
    lines = [f"run       {run_dir} ({phase})",
             f"task      {config.task.name} · reflector {config.search.reflector} · R={config.search.reflections_in_flight} "
             f"E={config.search.evaluations_in_flight}",
             f"progress  {state.evaluated}{f'/{target}' if target else ''} candidates evaluated · {state.discarded} "
             f"discarded · {state.violations} violations · {state.duplicates} duplicates · {state.iterations} "
             "reflections started"]
    if alive or not summary_path.exists():
        lines.append(f"in flight {len(state.queue)} candidates queued or evaluating · {len(state.reflections)} reflections")
    if state.members:
        best = max(state.members, key=lambda m: m.score)
        seeds = [m for m in state.members if m.origin == "seed"]
        lines.append(f"best      {best.score:.3f} {best.id} ({best.origin}: {best.commit_message[:80]})")
        if seeds:
            seed = max(seeds, key=lambda m: m.score)
            lines.append(f"seeds     best {seed.score:.3f} ({seed.commit_message})")
    calls = read_rows(run_dir, "llm_calls")
    cost = sum(u.cost_usd for u in state.usage.values())
    tokens = sum(u.prompt_tokens + u.completion_tokens for u in state.usage.values())
    hits = sum(c.cache_hit for c in calls)
    rate = f", cache {hits / len(calls):.0%} of {len(calls)} requests" if calls else ""
    lines.append(f"cost      ${cost:.4f}, {tokens} tokens{rate}")
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        lines.append(f"test      best {summary['best'].get('test_score')} · best seed {summary['best_seed'].get('test_score')} "
                     f"· stopped: {summary['stop_reason']}")
    return "\n".join(lines)


def best_source(run_dir: Path) -> tuple[str, str, float]:
    """(id, source, static score) of the best evaluated program so far."""
    members = restore(run_dir).members
    if not members:
        raise ValueError(f"{run_dir}: no program has been evaluated yet")
    best = max(members, key=lambda m: m.score)
    return best.id, best.source, best.score
