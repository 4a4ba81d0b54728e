"""Progress inside evaluations, from busy evaluators to the driver: a small board actor on the driver's
node that evaluators post to and the driver reads each turn of its loop.

An evaluator is busy for the whole of its job (a test with a real model can take most of an hour), so
the driver cannot ask it; the board is idle between short calls, so it always answers. Posts are
fire-and-forget and throttled (``POST_INTERVAL_S``), so they cost an evaluation next to nothing
(``scripts/bench_eval_progress.py``); from one evaluator they arrive in order, so the clearing post of a
finished job is never overtaken by a late update. Progress is advisory: a board that cannot be reached
never fails an evaluation or the run.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid

import ray

from mstar_ray.actors.run_services import on_this_node
from typing import Any
from mstar_ray.results import EvalProgress

POST_INTERVAL_S = 1.0
logger = logging.getLogger(__name__)


@ray.remote(num_cpus=0)
class ProgressBoard:
    def __init__(self) -> None:
        self.entries: dict[str, EvalProgress] = {}

    def post(self, key: str, progress: EvalProgress) -> None:
        self.entries[key] = progress

    def clear(self, key: str) -> None:
        self.entries.pop(key, None)

    def snapshot(self) -> dict[str, EvalProgress]:
        return dict(self.entries)


def start_progress_board() -> tuple[Any, str]:
    """The run's board, on the driver's node (it asks for no CPU), and its name: evaluators are given the
    name, not the handle, as they are the run's services (``run_services``)."""
    name = f"mstar-progress-{uuid.uuid4().hex[:12]}"
    board = ProgressBoard.options(name=name, scheduling_strategy=on_this_node()).remote()  # type: ignore[attr-defined]  # mypy does not apply class decorators: @ray.remote made it an ActorClass
    ray.get(board.snapshot.remote())  # surface a failed start here, not later
    return board, name


class ProgressReporter:
    """The evaluator's side: a ``progress`` hook for ``evaluate`` that posts a copy at most every
    ``interval_s`` seconds (and always the last one), then clears the job's entry on ``close``."""

    def __init__(self, board: Any, key: str, *, interval_s: float = POST_INTERVAL_S) -> None:  # board: a ProgressBoard actor handle
        self.board, self.key, self.interval_s = board, key, interval_s
        self._last = float("-inf")
        self.posts = 0

    def _send(self, method: str, *args: object) -> None:
        try:
            getattr(self.board, method).remote(self.key, *args)
        except Exception as exc:  # the board is advisory: never let it fail an evaluation
            logger.debug("progress board unreachable: %s", exc)

    def __call__(self, progress: EvalProgress) -> None:
        now = time.monotonic()
        if progress.finished or now - self._last >= self.interval_s:
            self._last = now
            self.posts += 1
            self._send("post", dataclasses.replace(progress))

    def close(self) -> None:
        self._send("clear")
