"""The host side of the sandbox: start a candidate program in its own process and call it under limits.

Per call, this side is the authority: it holds the wall-clock deadline (the process is killed, not
abandoned), counts toolkit LLM calls, measures ``read()`` output and answers the program's LLM and
embedding requests itself, so the sandbox never holds a key or a connection. Per process, the sandbox
isolates itself before the program loads (``sandbox.runner``, ``sandbox.oslayers``, ``sandbox.guard``)
and reports which layers are active.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sandbox import wire

LLMHandler = Callable[[list[dict[str, str]]], str]
EmbedHandler = Callable[[list[str]], list[list[float]]]

# Variables a sandbox may inherit; everything else (keys, tokens, credentials, proxies) is dropped.
_ENV_ALLOWED = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_SANDBOX_ROOT = str(Path(__file__).resolve().parents[1])
MAX_EMBED_TEXTS = 4096

# Outcome kinds that are the program's fault and, per the contract, score it zero.
VIOLATION_KINDS = frozenset(
    {"timeout", "llm_budget", "read_too_long", "crashed", "memory", "cpu", "file_size", "forbidden", "thread",
     "protocol", "contract", "recursion"}
)


class SandboxLimits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    call_timeout_s: float = Field(60.0, gt=0, description="wall deadline of one write/read (and of loading)")
    llm_calls_per_call: int = Field(1, ge=0, description="toolkit LLM calls allowed in one write/read")
    read_max_chars: int = Field(3000, gt=0)
    memory_mb: int = Field(2048, ge=256, description="address-space limit of the sandbox process")
    cpu_seconds: int = Field(600, gt=0, description="CPU-time limit of the whole sandbox process")
    file_size_mb: int = Field(64, gt=0)
    max_open_files: int = Field(256, ge=32)


class Outcome(BaseModel):
    """What one load/write/read call produced."""

    ok: bool
    value: Any = None
    kind: str | None = None
    message: str = ""
    traceback: str = ""
    llm_calls: int = 0
    seconds: float = 0.0
    logs: list[str] = []

    @property
    def violation(self) -> bool:
        return self.kind in VIOLATION_KINDS

    def describe(self) -> str:
        return "ok" if self.ok else f"{self.kind}: {self.message}"


class SandboxStartError(RuntimeError):
    """The fork server could not be started (a broken install, not a broken program)."""


def sandbox_environment() -> dict[str, str]:
    env = {k: os.environ[k] for k in _ENV_ALLOWED if k in os.environ}
    env.update(
        PYTHONPATH=_SANDBOX_ROOT,
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        ANONYMIZED_TELEMETRY="False",
    )
    return env


class ForkServer:
    """A warm zygote process (``sandbox.zygote``) that forks one sandbox per request."""

    def __init__(self, start_timeout_s: float = 120.0):
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._lock = threading.Lock()
        self._control = host
        self._process = subprocess.Popen(
            [sys.executable, "-c", "import sys; from sandbox.zygote import main; main(int(sys.argv[1]))",
             str(child.fileno())],
            pass_fds=[child.fileno()],
            env=sandbox_environment(),
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        child.close()
        self._control.settimeout(start_timeout_s)
        try:
            reply = json.loads(self._control.recv(65536) or b'{"op": "failed", "error": "exited"}')
        except (TimeoutError, OSError, json.JSONDecodeError) as exc:
            self.close()
            raise SandboxStartError(f"the sandbox fork server did not start: {exc}") from None
        if reply.get("op") != "ready":
            self.close()
            raise SandboxStartError(f"the sandbox fork server failed to start: {reply.get('error')}")
        self._control.settimeout(30.0)

    def _request(self, message: dict[str, Any], fds: list[int] = ()) -> dict[str, Any]:
        with self._lock:
            socket.send_fds(self._control, [json.dumps(message).encode()], list(fds))
            data = self._control.recv(65536)
        if not data:
            raise SandboxStartError("the sandbox fork server died")
        return json.loads(data)

    def spawn(self, workdir: str, limits: SandboxLimits) -> tuple[int, socket.socket]:
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            reply = self._request({"op": "spawn", "workdir": workdir, "limits": limits.model_dump()}, [child.fileno()])
        finally:
            child.close()
        return int(reply["pid"]), host

    def reap(self, pid: int) -> dict[str, Any]:
        return self._request({"op": "reap", "pid": pid})

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def close(self) -> None:
        self._control.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


_shared: ForkServer | None = None
_shared_lock = threading.Lock()


def shared_fork_server() -> ForkServer:
    """The fork server of this process, started on first use and restarted if it died."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.alive:
            _shared = ForkServer()
        return _shared


class Sandbox:
    """One candidate program, alive in its own process until ``close()``.

    Use as a context manager. ``start()`` loads the program and constructs its ``KnowledgeBase``;
    ``write``/``read`` then call it. After a violation that killed the process every further call
    returns the same outcome.
    """

    def __init__(
        self,
        source: str,
        *,
        limits: SandboxLimits | None = None,
        llm: LLMHandler | None = None,
        embed: EmbedHandler | None = None,
        fork_server: ForkServer | None = None,
    ):
        self.source = source
        self.limits = limits or SandboxLimits()
        self._llm = llm
        self._embed = embed
        self._fork_server = fork_server or shared_fork_server()
        self.workdir = tempfile.mkdtemp(prefix="mstar-sbx-")
        os.chmod(self.workdir, 0o700)
        self.pid: int | None = None
        self._sock: socket.socket | None = None
        self._dead: Outcome | None = None
        self.layers: list[str] = []
        self.missing_layers: dict[str, str] = {}
        self.ready_seconds: float | None = None
        self.exit_status: dict[str, Any] | None = None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Outcome:
        started = time.monotonic()
        self.pid, self._sock = self._fork_server.spawn(self.workdir, self.limits)
        outcome = self._call({"op": "load", "source": self.source}, "load")
        self.ready_seconds = time.monotonic() - started
        if not outcome.ok and self._dead is None:
            self._dead = outcome.model_copy(update={"message": f"the program did not load: {outcome.message}"})
        return outcome

    def close(self) -> None:
        if self._sock is not None:
            try:
                wire.send(self._sock, {"op": "close"})
            except OSError:
                pass
            self._kill()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _kill(self) -> None:
        """SIGKILL and reap. The zygote reaps only when asked, so the pid cannot be reused before."""
        if self.pid is not None and self.exit_status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.exit_status = self._fork_server.reap(self.pid)
            except (OSError, SandboxStartError):
                self.exit_status = {"exitcode": None}
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    # -- calls -----------------------------------------------------------------------------------

    def write(self, item: dict[str, Any], raw_text: str) -> Outcome:
        return self._call({"op": "write", "item": item, "raw_text": raw_text}, "write")

    def read(self, query: dict[str, Any]) -> Outcome:
        outcome = self._call({"op": "read", "query": query}, "read")
        if outcome.ok and isinstance(outcome.value, str) and len(outcome.value) > self.limits.read_max_chars:
            outcome = outcome.model_copy(
                update={
                    "ok": False,
                    "kind": "read_too_long",
                    "message": f"read() returned {len(outcome.value):,} characters; the limit is "
                    f"{self.limits.read_max_chars:,}",
                    "value": None,
                }
            )
        return outcome

    def feedback(self, query: dict[str, Any], score: float) -> Outcome:
        """``kb.feedback(query, score)``, for programs that define it; the same limits as a read."""
        return self._call({"op": "feedback", "query": query, "score": float(score)}, "feedback")

    def _fatal(self, kind: str, message: str, started: float, llm_calls: int) -> Outcome:
        self._kill()
        outcome = Outcome(ok=False, kind=kind, message=message, seconds=time.monotonic() - started, llm_calls=llm_calls)
        self._dead = outcome
        return outcome

    def _call(self, message: dict[str, Any], what: str) -> Outcome:
        if self._dead is not None:
            return self._dead
        if self._sock is None:
            raise RuntimeError("Sandbox.start() must be called first")
        started = time.monotonic()
        deadline = started + self.limits.call_timeout_s
        llm_calls = 0
        try:
            wire.send(self._sock, message)
            while True:
                frame = self._recv(deadline)
                op = frame["op"]
                if op == "done":
                    break
                if op == "layers":
                    self.layers = [str(x) for x in frame.get("layers", [])]
                    self.missing_layers = {str(k): str(v) for k, v in dict(frame.get("missing", {})).items()}
                elif op == "violation":
                    # Disqualified already: stop it now rather than let it run on to the deadline.
                    message_text = f"{frame.get('event')}: {frame.get('detail')}"
                    return self._fatal("forbidden", message_text, started, llm_calls)
                elif op == "llm":
                    llm_calls += 1
                    if llm_calls > self.limits.llm_calls_per_call:
                        budget = (f"{llm_calls} toolkit LLM calls in one {what}(); at most "
                                  f"{self.limits.llm_calls_per_call} allowed")
                        return self._fatal("llm_budget", budget, started, llm_calls)
                    else:
                        wire.send(self._sock, self._answer_llm(frame.get("messages")))
                elif op == "embed":
                    wire.send(self._sock, self._answer_embed(frame.get("texts")))
                else:
                    return self._fatal("protocol", f"unexpected message {op!r} from the sandbox during {what}()", started, llm_calls)
        except TimeoutError:
            return self._fatal(
                "timeout", f"{what}() did not finish within {self.limits.call_timeout_s:g} s; the process was killed",
                started, llm_calls,
            )
        except wire.ChannelClosed:
            self._kill()
            return self._fatal(self._death_kind(), self._death_message(what), started, llm_calls)
        except (wire.FrameError, OSError) as exc:
            return self._fatal("protocol", f"broken channel during {what}(): {exc}", started, llm_calls)

        seconds = time.monotonic() - started
        fields = {
            "llm_calls": llm_calls,
            "seconds": seconds,
            "logs": [str(line) for line in frame.get("logs", [])][:200],
        }
        if frame.get("ok"):
            return Outcome(ok=True, value=frame.get("value"), **fields)
        return Outcome(
            ok=False,
            kind=str(frame.get("kind", "exception")),
            message=str(frame.get("message", "")),
            traceback=str(frame.get("traceback", "")),
            **fields,
        )

    def _recv(self, deadline: float) -> dict[str, Any]:
        assert self._sock is not None

        def read_exact(n: int) -> bytes:
            chunks = bytearray()
            while len(chunks) < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                self._sock.settimeout(remaining)
                chunk = self._sock.recv(min(n - len(chunks), 1 << 20))
                if not chunk:
                    raise wire.ChannelClosed("sandbox closed the channel")
                chunks += chunk
            return bytes(chunks)

        (length,) = wire.HEADER.unpack(read_exact(wire.HEADER.size))
        if length > wire.MAX_FRAME_BYTES:
            raise wire.FrameError(f"frame of {length} bytes exceeds the limit")
        return wire.decode_body(read_exact(length))

    def _answer_llm(self, messages: Any) -> dict[str, Any]:
        if self._llm is None:
            return {"op": "reply", "ok": False, "error": "no toolkit LLM is configured"}
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return {"op": "reply", "ok": False, "error": "messages must be a list of objects"}
        try:
            return {"op": "reply", "ok": True, "text": self._llm(messages)}
        except Exception as exc:  # the endpoint's failure is reported to the program, not fatal to the host
            return {"op": "reply", "ok": False, "error": f"toolkit LLM call failed: {type(exc).__name__}: {exc}"}

    def _answer_embed(self, texts: Any) -> dict[str, Any]:
        if self._embed is None:
            raise wire.FrameError("the program asked for embeddings but no embedder is configured")
        if not isinstance(texts, list) or len(texts) > MAX_EMBED_TEXTS:
            raise wire.FrameError(f"embedding request must be a list of at most {MAX_EMBED_TEXTS} texts")
        return {"op": "reply", "vectors": self._embed([str(t) for t in texts])}

    def _death_kind(self) -> str:
        sig = (self.exit_status or {}).get("signal")
        return {signal.SIGXCPU: "cpu", signal.SIGXFSZ: "file_size", signal.SIGSYS: "forbidden"}.get(sig, "crashed")

    def _death_message(self, what: str) -> str:
        status = self.exit_status or {}
        if status.get("signal") is not None:
            sig = signal.Signals(status["signal"]).name
            cause = {
                "SIGXCPU": "it exceeded its CPU-time limit",
                "SIGXFSZ": "it exceeded its file-size limit",
                "SIGSYS": "it made a forbidden system call",
                "SIGKILL": "it was killed (out of memory?)",
            }.get(sig, "it crashed")
            return f"the sandbox process died of {sig} during {what}(): {cause}"
        return f"the sandbox process exited with code {status.get('exitcode')} during {what}()"
