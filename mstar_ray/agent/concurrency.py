"""How the steps of one evaluation overlap (docs/design.md section 3, "One evaluation as a pipeline").

Model calls of one evaluation are independent of each other almost everywhere; the sandbox is not: the
knowledge base is one stateful process, so every call into it keeps the order the serial protocol gives it.
Two pieces do that here:

- an executor for the evaluation's model steps (``executor``): a bounded thread pool, or, with one slot,
  an inline one that runs each step where it is submitted, so the serial protocol is exactly the old loop;
- ``Turns``: item *i* may call into the sandbox only after items 0..i-1 have (a ticket lock in item
  order), so the program sees the reads in the same order as the serial protocol, whatever order the
  model's replies come back in. ``stop`` ends every wait (a violation: nothing more reaches the sandbox).

Requests in flight are bounded twice: by these slots (threads of this process) and, across the whole run,
by each endpoint's ``max_concurrency`` at the gateway.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any, TypeVar

from mstar_ray.results import SERIAL, EvalConcurrency

__all__ = ["SERIAL", "EvalConcurrency", "TurnsStopped", "Turns", "as_done", "executor", "in_order"]
T = TypeVar("T")
Input = TypeVar("Input")


class TurnsStopped(Exception):
    """The evaluation stopped (a violation, a failed step) before this item's turn came."""


class Turns:
    """A ticket lock: ``wait(i)`` returns once turns 0..i-1 are ``done`` (in any order: an item that ends
    without reading passes its turn when it ends); ``stop`` releases every waiter with ``TurnsStopped``."""

    def __init__(self) -> None:
        self._next = 0
        self._finished: set[int] = set()
        self._stopped = False
        self._cond = threading.Condition()

    def wait(self, turn: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._stopped or self._next == turn)
            if self._stopped:
                raise TurnsStopped()

    def done(self, turn: int) -> None:
        with self._cond:
            if turn >= self._next:
                self._finished.add(turn)
            while self._next in self._finished:
                self._finished.discard(self._next)
                self._next += 1
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    @property
    def stopped(self) -> bool:
        return self._stopped


class _Inline(concurrent.futures.Executor):
    """Runs each step when it is submitted: one slot, no thread, the serial protocol as it always was."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever reads the future, as a pool would
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


class _Pool(concurrent.futures.ThreadPoolExecutor):
    def __exit__(self, *exc: object) -> None:
        # Steps not started never start (an evaluation that stops sends nothing more); those in flight end.
        self.shutdown(wait=True, cancel_futures=True)


def executor(slots: int, name: str) -> concurrent.futures.Executor:
    """Where an evaluation's steps run: inline with one slot, else a pool of ``slots`` threads."""
    return _Inline() if slots <= 1 else _Pool(max_workers=slots, thread_name_prefix=name)


def in_order(pool: concurrent.futures.Executor, step: Callable[[Input], T], inputs: list[Input],
             window: int) -> Iterator[T]:
    """``step(x)`` for each input, at most ``window`` of them started ahead of the one consumed, yielded in
    input order (each as soon as it and those before it are back): the write phase's extraction pipeline.
    A consumer that stops early leaves the rest unsubmitted."""
    futures: dict[int, concurrent.futures.Future[T]] = {}
    for index in range(len(inputs)):
        for ahead in range(index, min(len(inputs), index + max(1, window))):
            if ahead not in futures:
                futures[ahead] = pool.submit(step, inputs[ahead])
        yield futures.pop(index).result()


def as_done(pool: concurrent.futures.Executor, step: Callable[[Input], T], inputs: list[Input], window: int,
            go_on: Callable[[], bool]) -> Iterator[tuple[Input, concurrent.futures.Future[T]]]:
    """``(input, future)`` for each input as its step finishes, at most ``window`` in flight; no new step
    starts once ``go_on()`` is false."""
    pending: dict[concurrent.futures.Future[T], Input] = {}
    queue = list(inputs)
    while queue or pending:
        while queue and len(pending) < max(1, window) and go_on():
            value = queue.pop(0)
            pending[pool.submit(step, value)] = value
        if not pending:
            return
        done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            yield pending.pop(future), future
