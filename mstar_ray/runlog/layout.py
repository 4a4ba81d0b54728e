"""The run directory: what a run leaves on disk, file by file.

Only the driver writes here (workers send their results to it), so no file needs cross-process locking
beyond the guard against a second driver on the same logs. Everything is written so that a SIGKILL at
any instant leaves every finished record readable: whole files are written to a temporary name and
renamed over (a crash can leave a ``.<name>.*.tmp`` behind, which nothing reads), logs are append-only
Arrow IPC streams fsync'ed after each append.

    RUN_DIR/
      config.yaml          the run config (whole file, atomic); on resume only the budget and reflector models may differ
      split.json           the static / confirmation / test question split and the texts written for the
                           static questions, with the share of their evidence those texts hold (atomic)
      seeds.json           the seeds as the run started with them: name and program id, in order (atomic);
                           a resume queues any the logs never saw (a run killed before it queued them)
      programs/<id>.py     every program source once, named by its content hash (mstar_ray.program_id)
      candidates.arrows    one row per candidate: lineage, status, scores, cost, worker and node
      results.arrows       one row per candidate x question: prediction, expected, score, query, context
      llm_calls.arrows     one row per LLM request: role, model, tokens, latency, cache hit, cost
      events.arrows        the scheduling history: submitted, started, finished, failed, retried, ...
      cache.sqlite         the run-wide LLM reply cache
      live.json            while the driver runs: each evaluation in flight (texts written, questions
                           answered, its ETA), rewritten every few seconds; removed at the end
      summary.json         the final summary (whole file, atomic), absent while the run is live
      best.py              the best program's source, written at the end of the run
      structure.json       the population's structural clusters and 2-D map, written at the end of the run
      transfer.json        written by mstar-ray transfer: this run's program and the seeds on other runs' tasks

The ``*.arrows`` logs are Arrow IPC *stream* files whose schemas live in ``mstar_ray.runlog.schemas``;
they read without mstar_ray (see ``mstar_ray.runlog.writer`` for how).
"""

from __future__ import annotations

from pathlib import Path

CONFIG = "config.yaml"
SPLIT = "split.json"
SEEDS = "seeds.json"
PROGRAMS = "programs"
CACHE = "cache.sqlite"
SUMMARY = "summary.json"
BEST = "best.py"
STRUCTURE = "structure.json"
TRANSFER = "transfer.json"
LIVE = "live.json"
LOG_SUFFIX = ".arrows"


def require_run_dir(run_dir: str | Path) -> Path:
    """``run_dir`` if a run was started there (its config is written first); else the user's error, said so."""
    from mstar_ray.exit_codes import MissingInput

    if not (Path(run_dir) / CONFIG).is_file():
        raise MissingInput(f"{run_dir} is not a run directory: no {CONFIG}")
    return Path(run_dir)


def log_path(run_dir: str | Path, table: str) -> Path:
    return Path(run_dir) / f"{table}{LOG_SUFFIX}"


def program_path(run_dir: str | Path, program_id: str) -> Path:
    return Path(run_dir) / PROGRAMS / f"{program_id}.py"
