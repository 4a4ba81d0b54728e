"""Live progress of a search: a refreshing status block on a terminal, plain log lines elsewhere. The search's
counts are read from its ``SearchState`` as the line is drawn; ``ProgressState`` holds only what the live line
alone knows (the phase, the work in flight, the cost, the model requests)."""

from __future__ import annotations

import sys
import time

from typing import TextIO

from pydantic import BaseModel

from mstar_ray.runlog.live import InFlight
from mstar_ray.state.search_state import SearchState
from mstar_ray.terminal import printable


class ProgressState(BaseModel):
    target: int | None = None  # children to evaluate (search.max_candidates)
    evaluating: int = 0
    reflecting: int = 0
    best_score: float | None = None  # the incumbent's (mstar_ray.search.selection), with its interval
    best_low: float | None = None
    best_high: float | None = None
    cost_usd: float = 0.0
    tokens: int = 0
    cache_hits: int = 0
    requests: int = 0
    requests_in_flight: int = 0  # model requests holding a slot at the gateway now, across the run
    phase: str = "starting"
    in_flight: list[InFlight] = []  # each evaluation's own progress
    nodes: str = ""  # the worker nodes up by type, and those the autoscaler is starting (driver.node_watch)
    waiting_for_node: int = 0  # evaluations handed to an evaluator that has no node yet


def _line(state: ProgressState, search: SearchState, elapsed: float) -> str:
    rate = search.evaluated / elapsed * 60 if elapsed > 0 else 0.0
    eta = ""
    if state.phase == "searching" and state.target and rate > 0:
        # Candidates per minute say nothing about a confirmation or a test: those show their own ETA.
        eta = f" · ETA {max(0.0, (state.target - search.evaluated) / rate):.1f} min"
    best = "-" if state.best_score is None else f"{state.best_score:.3f}"
    if state.best_low is not None and state.best_high is not None:
        best += f" [{state.best_low:.3f}, {state.best_high:.3f}]"
    best_seed = search.best_seed_score()
    seed = "-" if best_seed is None else f"{best_seed:.3f}"
    target = f"/{state.target}" if state.target else ""
    hit_rate = f"{state.cache_hits / state.requests:.0%}" if state.requests else "-"
    duplicates = f", duplicates {search.duplicates}" if search.duplicates else ""
    duplicates += f", screened out {search.screened_out}" if search.screened_out else ""
    waiting = f" ({state.waiting_for_node} waiting for a node)" if state.waiting_for_node else ""
    nodes = f" · nodes {state.nodes}" if state.nodes else ""
    return (f"[{state.phase}] candidates {search.evaluated}{target} (discarded {search.discarded}, violations "
            f"{search.violations}{duplicates}) · in flight: {state.evaluating} eval{waiting}, {state.reflecting} reflect, {state.requests_in_flight} requests · best {best} "
            f"(seeds {seed}) · ${state.cost_usd:.4f}, {state.tokens} tokens, cache {hit_rate} · "
            f"{rate:.1f}/min{eta}{nodes}" + "".join(f" · {e.describe()}" for e in state.in_flight) + f" · {elapsed:.0f} s")


class Progress:
    """Redraws one status line in place on a TTY; otherwise prints a line when something changed, at
    most every ``interval_s`` seconds, so logs stay readable."""

    def __init__(self, stream: TextIO | None = None, *, interval_s: float = 5.0) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.interval_s = interval_s
        self.started = time.monotonic()
        self._last_text = ""
        self._last_time = 0.0

    def update(self, state: ProgressState, search: SearchState, *, force: bool = False) -> None:
        now = time.monotonic()
        text = printable(_line(state, search, now - self.started), lines=False)
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
            self.stream.flush()
            return
        core = text.rsplit(" · ", 1)[0]  # ignore the clock when deciding whether anything changed
        if force or (core != self._last_text and now - self._last_time >= self.interval_s):
            print(text, file=self.stream, flush=True)
            self._last_text, self._last_time = core, now

    def message(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K")
        print(printable(text), file=self.stream, flush=True)

    def close(self, state: ProgressState, search: SearchState) -> None:
        if self.tty:
            line = _line(state, search, time.monotonic() - self.started)
            self.stream.write("\r\x1b[2K" + printable(line, lines=False) + "\n")
            self.stream.flush()
        else:
            self.update(state, search, force=True)
