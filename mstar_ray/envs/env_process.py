"""One environment in a helper process of this one (``mstar_ray.envs.worker``), every call under a deadline.

An engine that does not answer in time is killed with its whole process group (its JVM too) and reported as
``EnvHung``; one whose process dies or breaks is ``EnvCrashed``; either way the next call starts a fresh
process, so the episode fails and the evaluation goes on. The process is started on first use and kept for
every later call (one per evaluator process: starting a JVM costs seconds, a game milliseconds). A process
that cannot get as far as its first answer twice in a row means the machine cannot run the environment
(``EnvUnavailable``), not that one episode went wrong.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from collections.abc import Iterator
from typing import Any, NoReturn
from typing import IO

from mstar_ray.envs import require
from mstar_ray.envs.base import (
    EnvCrashed, EnvDataMissing, EnvHung, EnvKind, EnvUnavailable, GameSpec, Observation,
)

# A fresh process starts its engine on its first request (a JVM: 2 s on a quiet machine, ten times that on a
# loaded one), so that request gets at least this long, whatever the step deadline.
START_TIMEOUT_S = 120.0
START_FAILURES_ALLOWED = 2
STDERR_TAIL_CHARS = 1500
CLOSE_WAIT_S = 5.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_SHARED: dict[str, EnvProcess] = {}
_IDLE: dict[str, list[EnvProcess]] = {}  # this process's environments of each kind not playing an episode now
_IDLE_LOCK = threading.Lock()
STATEFUL_OPS = ("step", "expert_action")  # they continue the game a reset started


class _NoAnswer(Exception):
    def __init__(self, hung: bool):
        self.hung = hung


class EnvProcess:
    def __init__(self, kind: EnvKind, *, start_timeout_s: float = START_TIMEOUT_S):
        self.kind = kind
        self.start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._buffer = b""
        self._answered = False  # the current process has answered once: it is past its start
        self._start_failures = 0
        self.started = 0  # processes started: the first, then one after each hang or crash

    @property
    def pid(self) -> int | None:
        """The helper process's pid (the leader of its process group), while one runs."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def games(self, game: GameSpec, timeout_s: float) -> list[str]:
        names: list[str] = self._call("games", {"game": game.model_dump()}, timeout_s, "listing its games")
        return names

    def reset(self, game: GameSpec, timeout_s: float) -> Observation:
        return Observation.model_validate(self._call("reset", {"game": game.model_dump()}, timeout_s, "a reset"))

    def step(self, action: str, timeout_s: float) -> Observation:
        return Observation.model_validate(self._call("step", {"action": action}, timeout_s, f"the action {action!r}"))

    def expert_action(self, timeout_s: float) -> str | None:
        action: str | None = self._call("expert_action", {}, timeout_s, "the expert's next action")
        return action

    def close(self) -> None:
        """Let the process end by itself (stdin closed), and kill its group if it does not."""
        if self._proc is None:
            return
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            self._proc.wait(timeout=CLOSE_WAIT_S)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._kill()

    def __enter__(self) -> EnvProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ the process

    def _start(self) -> None:
        require(self.kind)
        if self._stderr is None:
            self._stderr = tempfile.TemporaryFile()
        self._stderr.seek(0)
        self._stderr.truncate()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)}
        # Its own session: a kill reaches the engine's JVM (its child) through the process group.
        self._proc = subprocess.Popen([sys.executable, "-m", "mstar_ray.envs.worker", self.kind],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                      env=env, start_new_session=True)
        self._buffer, self._answered = b"", False
        self.started += 1

    def _kill(self) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        code = proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is None:
                continue
            try:
                pipe.close()
            except OSError:
                pass
        return code

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - STDERR_TAIL_CHARS))
        return self._stderr.read().decode("utf-8", "replace").strip()

    def _read_line(self, timeout_s: float) -> bytes:
        end = time.monotonic() + timeout_s
        assert self._proc is not None and self._proc.stdout is not None  # _call started it, with its pipes
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise _NoAnswer(hung=True)
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise _NoAnswer(hung=False)
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _call(self, op: str, args: dict[str, Any], timeout_s: float, what: str) -> Any:
        if self._proc is not None and self._proc.poll() is not None and op in STATEFUL_OPS:
            # Died since its last answer, mid-episode: a fresh process would not hold the game being played.
            self._broke(f"its process died before {what}", died=True)
        if self._proc is None or self._proc.poll() is not None:
            if self._proc is not None:
                self._kill()
            self._start()
        deadline = timeout_s if self._answered else max(timeout_s, self.start_timeout_s)
        assert self._proc is not None and self._proc.stdin is not None  # started just above, with its pipes
        try:
            self._proc.stdin.write((json.dumps({"op": op, "args": args}) + "\n").encode())
            self._proc.stdin.flush()
            line = self._read_line(deadline)
        except BrokenPipeError:
            self._broke(f"its process died before {what}", died=True)
        except _NoAnswer as no:
            if no.hung:
                self._broke(f"it did not answer {what} within {deadline:g} s; it was killed", hung=True)
            self._broke(f"its process died during {what}", died=True)
        try:
            reply = json.loads(line)
        except ValueError:
            self._broke(f"its reply to {what} was not JSON: {line[:200]!r}")
        if "value" in reply:
            self._answered, self._start_failures = True, 0
            return reply["value"]
        error, message = reply["error"], reply["message"]
        if error == "unavailable":
            self._kill()
            raise EnvUnavailable(message)
        if error in ("data", "input"):
            self._answered = True  # the process works; the request was wrong
            raise (EnvDataMissing if error == "data" else ValueError)(message)
        self._broke(f"its engine broke during {what}: {message}")

    def _broke(self, what: str, *, hung: bool = False, died: bool = False) -> NoReturn:
        """Kill the process (a fresh one starts on the next call) and raise what happened; a process that died by
        itself has its exit code and last output told."""
        started = self._answered
        code = self._kill()
        detail = f"the {self.kind} environment failed: {what}"
        if died:
            tail = self._stderr_tail()
            detail += f" (exit code {code})" + (f"; its last output: {tail[-600:]}" if tail else "")
        if not started:
            self._start_failures += 1
            if self._start_failures >= START_FAILURES_ALLOWED:
                self._start_failures = 0
                raise EnvUnavailable(f"{detail}; it failed to start {START_FAILURES_ALLOWED} times in a row, so this "
                                     "machine cannot run it")
        raise (EnvHung if hung else EnvCrashed)(detail)


def shared(kind: EnvKind) -> EnvProcess:
    """This process's environment of ``kind``: one helper process, started on first use and kept for every
    later episode, job and task load of the process (it ends with the process)."""
    if kind not in _SHARED:
        _SHARED[kind] = EnvProcess(kind)
    return _SHARED[kind]


@contextlib.contextmanager
def leased(kind: EnvKind) -> Iterator[EnvProcess]:
    """An environment of ``kind`` for one episode, used by no other thread until the episode ends: the shared one
    (``shared``) when it is free, else another, kept for later episodes. Concurrent episodes each get a process;
    an evaluation bounds how many it plays at once."""
    with _IDLE_LOCK:
        idle = _IDLE.setdefault(kind, [shared(kind)])
        env = idle.pop() if idle else EnvProcess(kind)
    try:
        yield env
    finally:
        with _IDLE_LOCK:
            _IDLE[kind].append(env)
