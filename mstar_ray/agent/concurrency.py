"""How the steps of one evaluation overlap (docs/design.md section 3, "One evaluation as a pipeline").

Model calls of one evaluation are independent of each other almost everywhere; the sandbox is not: the
knowledge base is one stateful process, so every call into it keeps the order the serial protocol gives it.
Two pieces do that here:

- an executor for the evaluation's model steps (``executor``): a bounded thread pool, or, with one slot,
  an inline one that runs each step where it is submitted, so the serial protocol is exactly the old loop.
  Its threads take a step needed now before any step started ahead of need (``Ahead``: the items' queries,
  built while the writes run), so those only use the slots the others leave free;
- ``Turns``: item *i* may call into the sandbox only after items 0..i-1 have (a ticket lock in item
  order), so the program sees the reads in the same order as the serial protocol, whatever order the
  model's replies come back in. ``stop`` ends every wait (a violation: nothing more reaches the sandbox).

Requests in flight are bounded twice: by these slots (threads of this process) and, across the whole run,
by each endpoint's ``max_concurrency`` at the gateway.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import math
import queue
import threading
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from mstar_ray.results import SERIAL, EvalConcurrency

__all__ = ["NOTHING_AHEAD", "SERIAL", "Ahead", "EvalConcurrency", "TurnsStopped", "Turns", "as_done", "executor", "in_order"]
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


class _Pool(concurrent.futures.Executor):
    """``slots`` threads that take the waiting step of the lowest ``priority`` first (in submission order within
    one): steps started ahead of need (``Ahead``) only ever take a slot the steps needed now leave free."""

    def __init__(self, slots: int, name: str):
        self._queue: queue.PriorityQueue[tuple[float, int, Any]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._slots, self._name = slots, name
        self._threads: list[threading.Thread] = []
        self._idle = threading.Semaphore(0)  # threads waiting for a step: a new one starts only when none is
        self._starting = threading.Lock()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        return self.put(0, fn, args, kwargs)

    def put(self, priority: float, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
              ) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._queue.put((priority, next(self._order), (future, fn, args, kwargs)))
        with self._starting:
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._slots:
                thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
        return future

    def _work(self) -> None:
        while True:
            _, _, job = self._queue.get()
            if job is None:
                return
            future, fn, args, kwargs = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # noqa: BLE001 - handed to whoever reads the future
                    future.set_exception(exc)
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if cancel_futures:
            while True:
                try:
                    _, _, job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    job[0].cancel()
        with self._starting:
            threads, self._slots = list(self._threads), 0  # no thread starts after this
        for _ in threads:
            self._queue.put((math.inf, next(self._order), None))
        if wait:
            for thread in threads:
                thread.join()

    def __exit__(self, *exc: object) -> None:
        # Steps not started never start (an evaluation that stops sends nothing more); those in flight end.
        self.shutdown(wait=True, cancel_futures=True)
        return None


def executor(slots: int, name: str) -> concurrent.futures.Executor:
    """Where an evaluation's steps run: inline with one slot, else a pool of ``slots`` threads."""
    return _Inline() if slots <= 1 else _Pool(slots, name)


class Ahead(Generic[Input, T]):
    """Steps started before they are needed, in the slots of ``pool`` that the steps needed now leave free: each
    waits behind every step submitted at the usual priority. ``claim(key)`` hands over one started for ``key``
    (its future), or, if it has not started yet, cancels it and gives None: the caller then runs the step
    itself, in the slot it already holds, so the steps in flight never exceed the pool's slots."""

    def __init__(self, pool: concurrent.futures.Executor, step: Callable[[Input], T], keys: list[Input]):
        self._futures: dict[Input, list[concurrent.futures.Future[T]]] = {}
        self._lock = threading.Lock()
        if isinstance(pool, _Pool):  # inline (one slot): nothing runs ahead
            for key in keys:
                self._futures.setdefault(key, []).append(pool.put(1, step, (key,), {}))

    def claim(self, key: Input) -> concurrent.futures.Future[T] | None:
        with self._lock:
            waiting = self._futures.get(key)
            future = waiting.pop(0) if waiting else None
        if future is None or future.cancel():
            return None
        return future


NOTHING_AHEAD: Ahead[Any, Any] = Ahead(_Inline(), lambda key: key, [])


def in_order(pool: concurrent.futures.Executor, step: Callable[[Input], T], inputs: list[Input],
             window: int) -> Iterator[T]:
    """``step(x)`` for each input, at most ``window`` of them started ahead of the one consumed, yielded in
    input order (each as soon as it and those before it are back): the write phase's extraction pipeline.
    The first ``window`` are submitted by this call, before anything is consumed (what is queued after them
    waits behind them); a consumer that stops early leaves the rest unsubmitted."""
    window = max(1, window)
    futures = {index: pool.submit(step, inputs[index]) for index in range(min(len(inputs), window))}

    def results() -> Iterator[T]:
        for index in range(len(inputs)):
            for ahead in range(index, min(len(inputs), index + window)):
                if ahead not in futures:
                    futures[ahead] = pool.submit(step, inputs[ahead])
            yield futures.pop(index).result()
    return results()


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
