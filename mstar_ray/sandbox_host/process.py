"""The host side of the sandbox: start a candidate program in its own process and call it under limits.

The operating system is the boundary: the fork server runs in a bubblewrap jail (``jail``), each
candidate in namespaces of its own under an allow-list seccomp filter and Landlock (``mstar_ray.sandbox``,
``sandbox/`` of a checkout).
This side trusts nothing the candidate's process sends. It holds the wall-clock deadline (the process is
killed, not abandoned), validates every frame against a schema (``frames``), answers exactly one
reply per request, builds LLM requests itself from a prompt of bounded size, embeds in chunks within
the call's deadline and a per-call budget, and freezes the process between calls (SIGSTOP), so nothing
it left running can act, spend or send outside a call: a call's result is only what arrived within it.
It learns the candidate's pid from the kernel (the credentials on its first frame) and checks from
outside, in /proc, that the layers it reports are there.

Reads from a snapshot (``Sandbox.snapshot``): once the writes are done, each read may run in a reader, a
process the candidate forks from its post-write state on request, with a channel of its own that this side
creates and hands in; it is called like the candidate (same deadline, budget, limits, filter), answers one
read and is killed. At most ``readers`` live at once. A process with more than one thread cannot be copied by
a fork: its reads stay in the candidate's own process, in order.

Chroma, whose runtime runs threads, lives in a process of its own for each program (``chroma_process``, in the same
layers and limits, started with the program or on its first ``toolkit.chroma`` call): the host relays each call
to it within the caller's deadline and budget, without decoding it, and gives each reader a view of the
post-write collections (``sandbox.chroma_store``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import select
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from mstar_ray.llm.waiting import WaitClock, charged_to
from mstar_ray.sandbox import wire
from mstar_ray.sandbox_host import chroma_process
from mstar_ray.sandbox_host.chroma_process import ChromaProcess
from mstar_ray.sandbox_host.fork_server import ForkServer, proc_status, shared_fork_server
from mstar_ray.sandbox_host.frames import (
    ChromaFrame, DoneFrame, EmbedFrame, LayersFrame, LLMFrame, ProtocolError, ViolationFrame, done_value,
)
from mstar_ray.sandbox_host.jail import SandboxStartError, SandboxUnavailable
from mstar_ray.sandbox_host.jailed_process import Fatal, JailedProcess, Overtime
from mstar_ray.sandbox_host.outcome import Outcome
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits

LLMHandler = Callable[[list[dict[str, str]]], str]
EmbedHandler = Callable[[list[str]], list[list[float]]]

log = logging.getLogger(__name__)

EMBED_CHUNK = 32  # texts embedded between two deadline checks
EXCUSE_LOOK_S = 0.05  # how often a host wait re-reads the time its request spent queued

PROBE = '''
from dataclasses import dataclass
INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""
@dataclass
class KnowledgeItem:
    text: str
@dataclass
class Query:
    text: str
class KnowledgeBase:
    def __init__(self, toolkit):
        pass
    def write(self, item, raw_text):
        pass
    def read(self, query):
        return ""
'''


def check_layers(limits: SandboxLimits | None = None, fork_server: ForkServer | None = None) -> dict[str, Any]:
    """Start one sandbox here and report its layers; raises ``SandboxUnavailable`` naming each required
    layer this machine cannot give, why, and the fix."""
    with Sandbox(PROBE, limits=limits, fork_server=fork_server) as sandbox:
        outcome = sandbox.start()
        if not outcome.ok:
            raise SandboxStartError(f"the probe program did not load: {outcome.describe()}")
        return {"layers": sandbox.layers, "missing": sandbox.missing_layers}


class _CallBudget:
    """Host work one call may ask for: requests, LLM calls and prompt size, texts and characters embedded."""

    def __init__(self, limits: SandboxLimits):
        self.limits = limits
        self.requests = 0
        self.llm_calls = 0
        self.texts = 0
        self.chars = 0

    def _request(self, what: str) -> str | None:
        self.requests += 1
        if self.requests > self.limits.toolkit_requests_per_call:
            return (f"{self.requests:,} toolkit requests in one {what}(); at most "
                    f"{self.limits.toolkit_requests_per_call:,} allowed")
        return None

    def chroma(self, what: str) -> str | None:
        return self._request(what)

    def llm(self, prompt: str, what: str) -> str | None:
        refused = self._request(what)
        if refused:
            return refused
        self.llm_calls += 1
        if self.llm_calls > self.limits.llm_calls_per_call:
            return f"{self.llm_calls} toolkit LLM calls in one {what}(); at most {self.limits.llm_calls_per_call} allowed"
        if len(prompt) > self.limits.llm_prompt_max_chars:
            return (f"a toolkit LLM prompt of {len(prompt):,} characters in {what}(); at most "
                    f"{self.limits.llm_prompt_max_chars:,} allowed")
        return None

    def embed(self, texts: list[str], what: str) -> str | None:
        refused = self._request(what)
        if refused:
            return refused
        self.texts += len(texts)
        self.chars += sum(len(t) for t in texts)
        if self.texts > self.limits.embed_texts_per_call or self.chars > self.limits.embed_chars_per_call:
            return (f"{self.texts:,} texts ({self.chars:,} characters) to embed in one {what}(); at most "
                    f"{self.limits.embed_texts_per_call:,} texts and {self.limits.embed_chars_per_call:,} characters")
        return None


class _HostFailure(Exception):
    """The host's own embedder failed (an endpoint, a budget): not the candidate's doing, so it propagates."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


class Sandbox(JailedProcess):
    """One candidate program, alive in its own process until ``close()``.

    Use as a context manager. ``start()`` loads the program and constructs its ``KnowledgeBase``;
    ``write``/``read`` then call it. After a violation that killed the process every further call
    returns the same outcome. Raises only ``SandboxUnavailable`` (a required layer is missing here) and
    ``SandboxStartError`` (the fork server is broken): whatever the candidate does is an ``Outcome``.
    """

    def __init__(
        self,
        source: str,
        *,
        limits: SandboxLimits | None = None,
        llm: LLMHandler | None = None,
        embed: EmbedHandler | None = None,
        fork_server: ForkServer | None = None,
        readers: int = 1,
    ):
        super().__init__(limits or SandboxLimits(), fork_server or shared_fork_server(chroma=False))
        self.source = source
        self.readers = readers
        self.fork_readers = readers > 1
        self.serial_reason: str | None = None  # why reads stayed in this process, once ``snapshot`` decided
        self.readers_forked = 0
        self.readers_peak = 0  # most readers alive at once, counted here
        self.children_peak = 0  # most children of the candidate at once, counted by the kernel (/proc)
        self.rss_peak_kb = 0  # most resident memory of the candidate and its readers at a fork
        self._forking = False
        self._readers_live = 0
        self._reader_slots = threading.BoundedSemaphore(max(1, readers))
        self._fork_lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._reader_pids: set[int] = set()  # every reader forked (a killed one may linger a moment)
        self._llm = llm
        self._embed = embed
        self._owner = self  # whose Chroma process serves this one's calls
        self._view = 0  # and which view of it: the program's process changes the collections themselves
        self._store: ChromaProcess | None = None
        self._store_lock = threading.Lock()
        self._views = 0
        self.relayed = False  # whether any Chroma call of this process was relayed
        self._worker: concurrent.futures.ThreadPoolExecutor | None = None
        self.ready_seconds: float | None = None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Outcome:
        started = time.monotonic()
        self._spawn({"fork_readers": self.fork_readers}, started + self.limits.call_timeout_s,
                    "the sandbox process did not set itself up")
        if "chroma" in self.source.lower():  # its Chroma process starts now, not in its first call's time
            try:
                self._chroma_store(time.monotonic() + self.limits.call_timeout_s)
            except (SandboxStartError, SandboxUnavailable):
                self._kill()
                raise
        outcome = self._call({"op": "load", "source": self.source}, "load")
        self.ready_seconds = time.monotonic() - started
        if not outcome.ok and self._dead is None:
            self._dead = outcome.model_copy(update={"message": f"the program did not load: {outcome.message}"})
        return outcome

    def close(self) -> None:
        super().close()
        if self._store is not None:
            self._store.close()
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)
            self._worker = None

    # -- calls -----------------------------------------------------------------------------------

    def write(self, item: dict[str, Any], raw_text: str) -> Outcome:
        return self._call({"op": "write", "item": item, "raw_text": raw_text}, "write")

    @property
    def reads_forked(self) -> bool:
        """Whether reads run in readers forked from the snapshot (independent of each other and of order)."""
        return self._forking

    def snapshot(self) -> str | None:
        """From now on, serve each read in a reader forked from the process as it is: every read sees this
        state and nothing another read changed. Returns why reads stay in this process instead, or None."""
        self.serial_reason = self._serial_reason()
        self._forking = self.serial_reason is None
        return self.serial_reason

    def _serial_reason(self) -> str | None:
        if self.readers <= 1:
            return "one reader (evaluation.readers = 1): reads run in the program's process, in order"
        if self._dead is not None or self.host_pid is None:
            return "the program's process is gone"
        try:
            threads = len(os.listdir(f"/proc/{self.host_pid}/task"))
        except OSError:
            return "the program's process is gone"
        if threads != 1:
            return f"the program's process runs {threads} threads, which a fork would not copy"
        return None

    def read(self, query: dict[str, Any]) -> Outcome:
        if self._forking:
            outcome = self._read_in_reader(query)
        else:
            outcome = self._call({"op": "read", "query": query}, "read")
        if outcome.ok and len(outcome.value) > self.limits.read_max_chars:
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

    def _read_in_reader(self, query: dict[str, Any]) -> Outcome:
        with self._reader_slots:
            reader = self._fork_reader()
            if isinstance(reader, Outcome):
                return reader
            with self._count_lock:
                self._readers_live += 1
                self.readers_peak = max(self.readers_peak, self._readers_live)
            try:
                return reader._call({"op": "read", "query": query}, "read")
            finally:
                reader.close()
                if reader.relayed and self._store is not None:
                    self._store.drop(reader._view)
                with self._count_lock:
                    self._readers_live -= 1

    def _fork_reader(self) -> _Reader | Outcome:
        """Ask the candidate for a reader on a new channel; the program's violation if it gives none. One fork
        at a time, up to the reader's first frame: every child of the candidate is then a reader it knows."""
        with self._fork_lock:
            return self._fork_reader_locked()

    def _fork_reader_locked(self) -> _Reader | Outcome:
        started = time.monotonic()
        host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        host_end.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        try:
            outcome = self._call({"op": "fork"}, "fork", channel=child_end.fileno())
        finally:
            child_end.close()
        if not outcome.ok:
            host_end.close()
            if outcome.violation:
                return outcome
            return self._fatal("protocol", f"the program's process forked no reader: {outcome.describe()}",
                               started, 0)
        reader = _Reader(self, host_end)
        try:
            reader.attach(started + self.limits.call_timeout_s)
        except (TimeoutError, OSError, ProtocolError, wire.ChannelClosed) as exc:
            reader.close()
            return self._fatal("protocol", f"the forked reader did not start: {type(exc).__name__}: {exc}",
                               started, 0)
        assert reader.host_pid is not None  # attach() returned: the reader's first frame named its pid
        self._reader_pids.add(reader.host_pid)
        strays = self._strays()
        if strays:
            reader.close()
            return self._fatal("tasks", f"{strays} process(es) beside the readers in the program's process", started, 0)
        self._measure_children()
        self.readers_forked += 1
        return reader

    def _children(self) -> list[int]:
        try:
            with open(f"/proc/{self.host_pid}/task/{self.host_pid}/children") as file:
                return [int(pid) for pid in file.read().split()]
        except (OSError, ValueError, TypeError):
            return []

    def _strays(self) -> int:
        """Processes of the program's own (not readers the host asked for): a freeze does not reach them, so
        none may outlive the call that started it. Only a process allowed to fork can have any."""
        if not self.fork_readers:
            return 0
        return len(set(self._children()) - self._reader_pids)

    def _measure_children(self) -> None:
        """The kernel's count of the candidate's children and their memory, right after a fork."""
        children = self._children()
        if self.host_pid is None:
            return
        try:
            rss = 0
            for pid in [self.host_pid, *children]:
                rss += int(proc_status(pid).get("VmRSS", "0 kB").split()[0])
        except (OSError, ValueError):
            return
        self.children_peak = max(self.children_peak, len(children))
        self.rss_peak_kb = max(self.rss_peak_kb, rss)

    def feedback(self, query: dict[str, Any], score: float) -> Outcome:
        """``kb.feedback(query, score)``, for programs that define it; the same limits as a read."""
        return self._call({"op": "feedback", "query": query, "score": float(score)}, "feedback")

    def _call(self, message: dict[str, Any], what: str, channel: int | None = None) -> Outcome:
        if self._dead is not None:
            return self._dead
        if self._sock is None:
            raise RuntimeError("Sandbox.start() must be called first")
        self._calls += 1
        number = self._calls
        started = time.monotonic()
        deadline = started + self.limits.call_timeout_s
        budget = _CallBudget(self.limits)
        clock = WaitClock()  # the call's toolkit requests queued behind others' load: not its time
        try:
            done = self._exchange({**message, "call": number}, number, what, deadline, budget, clock, channel)
        except (TimeoutError, Overtime):
            return self._fatal("timeout", f"{what}() did not finish within {self.limits.call_timeout_s:g} s; the "
                               "process was killed", started, budget.llm_calls)
        except wire.ChannelClosed:
            self._kill()
            return self._fatal(self._death_kind(), self._death_message(what), started, budget.llm_calls)
        except Fatal as exc:
            return self._fatal(exc.kind, str(exc), started, budget.llm_calls)
        except _HostFailure as exc:
            self._kill()
            raise exc.error from None
        except (ProtocolError, wire.FrameError, OSError) as exc:
            return self._fatal("protocol", f"during {what}(): {exc}", started, budget.llm_calls)
        except Exception as exc:  # noqa: BLE001 - a sandbox must never take its host down with it
            log.exception("unexpected error while talking to a sandbox")
            return self._fatal("protocol", f"during {what}(): {type(exc).__name__}: {exc}"[:2000], started,
                               budget.llm_calls)
        self._signal(signal.SIGSTOP)  # nothing it left running may act until the next call
        strays = self._strays() if what != "fork" else 0  # a fork's own reader is counted once it attached
        if strays:
            return self._fatal("tasks", f"{strays} process(es) started by the program still running after {what}() "
                               "returned", started, budget.llm_calls)
        fields = {"llm_calls": budget.llm_calls, "seconds": time.monotonic() - started, "logs": list(done.logs),
                  "queued_seconds": clock.seconds}
        if done.ok:
            try:
                value = done_value(done, what)
            except ProtocolError as exc:
                return self._fatal("protocol", str(exc), started, budget.llm_calls)
            return Outcome(ok=True, value=value, **fields)
        return Outcome(ok=False, kind=done.kind or "exception", message=done.message, traceback=done.traceback,
                       **fields)

    def _exchange(self, request: dict[str, Any], number: int, what: str, own_deadline: float,
                  budget: _CallBudget, clock: WaitClock, channel: int | None = None) -> DoneFrame:
        """Send one call and serve the sandbox's requests until its ``done``: every frame validated, each
        request answered once, and nothing accepted that was sent outside this call. The deadline is the
        program's own time: what its requests spent queued for shared endpoints moves it on (``clock``)."""
        assert self._sock is not None

        def deadline() -> float:
            return own_deadline + min(clock.seconds, self.limits.queued_max_s)

        ready, _, _ = select.select([self._sock], [], [], 0)
        if ready:
            if not self._sock.recv(1, socket.MSG_PEEK):
                raise wire.ChannelClosed("the sandbox process is gone")
            raise Fatal("protocol", f"the sandbox sent a frame between calls (before {what}())")
        self._signal(signal.SIGCONT)
        self._send(request, deadline())
        if channel is not None:  # a reader's channel, on a byte of its own after the request
            socket.send_fds(self._sock, [b"\0"], [channel])
        while True:
            frame = self._recv(deadline())
            if isinstance(frame, LayersFrame) or frame.call != number:
                raise ProtocolError(f"a {frame.op!r} frame that does not belong to this call")
            if isinstance(frame, DoneFrame):
                return frame
            if isinstance(frame, ViolationFrame):
                # Disqualified already: stop it now rather than let it run on to the deadline.
                raise Fatal("forbidden", f"{frame.event}: {frame.detail}")
            if isinstance(frame, LLMFrame):
                refused = budget.llm(frame.prompt, what)
                if refused:
                    raise Fatal("llm_budget", refused)
                self._signal(signal.SIGSTOP)  # waiting for its reply: nothing it runs beside uses the excused time
                reply = self._answer_llm(frame.prompt, own_deadline, clock)
                self._signal(signal.SIGCONT)
                self._send({"op": "reply", "call": number, **reply}, deadline())
            elif isinstance(frame, EmbedFrame):
                refused = budget.embed(frame.texts, what)
                if refused:
                    raise Fatal("embed_budget", refused)
                self._signal(signal.SIGSTOP)
                reply = self._answer_embed(frame.texts, own_deadline, clock)
                self._signal(signal.SIGCONT)
                self._send({"op": "reply", "call": number, **reply}, deadline())
            elif isinstance(frame, ChromaFrame):
                refused = budget.chroma(what)
                if refused:
                    raise Fatal("requests", refused)
                try:
                    store = self._owner._chroma_store(deadline())
                except (SandboxStartError, SandboxUnavailable) as exc:
                    raise _HostFailure(exc) from None
                self.relayed = True
                payload = store.relay(self._view, frame.payload, deadline())
                self._send({"op": "reply", "call": number, "payload": payload}, deadline())
            else:
                raise ProtocolError(f"a {frame.op!r} frame, which no program's process sends")

    def _chroma_store(self, deadline: float) -> ChromaProcess:
        """The program's Chroma process, started with the program when its source names Chroma, else on its
        first call. Raises ``SandboxStartError`` or ``SandboxUnavailable``: a start that fails is the host's."""
        with self._store_lock:
            if self._store is None:
                self._store = chroma_process.started(self.limits, deadline)
            return self._store

    def _new_view(self) -> int:
        with self._store_lock:
            self._views += 1
            return self._views

    # -- host work on the sandbox's behalf -------------------------------------------------------

    def _within(self, work: Callable[[threading.Event], Any], deadline: float, clock: WaitClock) -> Any:
        """Run ``work`` in a worker thread, waiting no longer than the call's deadline plus what ``clock``
        excuses (time the work spent queued behind others' load, up to ``queued_max_s``); ``work`` checks the
        event between its chunks and stops once the host has given up on it."""
        if self._worker is None:
            self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sandbox-host-work")
        cancelled = threading.Event()

        def charged(event: threading.Event) -> Any:
            with charged_to(clock):
                return work(event)

        future = self._worker.submit(charged, cancelled)
        while True:
            remaining = deadline + min(clock.seconds, self.limits.queued_max_s) - time.monotonic()
            try:
                return future.result(timeout=max(0.0, min(remaining, EXCUSE_LOOK_S)))
            except concurrent.futures.TimeoutError:
                if future.done():
                    # finished after the wait gave up and before this look (a race a busy machine makes likely):
                    # its own value, or its own exception (a timeout of its own among them), never the wait's
                    return future.result()
                if time.monotonic() < deadline + min(clock.seconds, self.limits.queued_max_s):
                    continue  # within the deadline, counting the queued time it excuses (which may have grown)
                cancelled.set()
                raise Overtime from None

    def _answer_llm(self, prompt: str, deadline: float, clock: WaitClock) -> dict[str, Any]:
        if self._llm is None:
            return {"ok": False, "error": "no toolkit LLM is configured"}
        messages = [{"role": "user", "content": prompt}]  # built here: the sandbox never shapes a request
        llm = self._llm
        try:
            text = self._within(lambda cancelled: llm(messages), deadline, clock)
        except Overtime:
            raise
        except Exception as exc:  # the endpoint's failure is reported to the program, not fatal to the host
            return {"ok": False, "error": f"toolkit LLM call failed: {type(exc).__name__}: {exc}"[:2000]}
        return {"ok": True, "text": str(text)}

    def _answer_embed(self, texts: list[str], deadline: float, clock: WaitClock) -> dict[str, Any]:
        if self._embed is None:
            raise Fatal("protocol", "the program asked for embeddings but no embedder is configured")
        embed = self._embed

        def chunks(cancelled: threading.Event) -> list[list[float]]:
            vectors: list[list[float]] = []
            for start in range(0, len(texts), EMBED_CHUNK):
                if cancelled.is_set():
                    break
                vectors += embed(texts[start:start + EMBED_CHUNK])
            return vectors

        try:
            return {"vectors": self._within(chunks, deadline, clock)}
        except Overtime:
            raise
        except Exception as exc:
            raise _HostFailure(exc) from exc

class _Reader(Sandbox):
    """One reader: a process the candidate forked from its post-write state, answering one read on its own
    channel, called exactly like the candidate and killed after it."""

    def __init__(self, parent: Sandbox, sock: socket.socket):
        super().__init__(parent.source, limits=parent.limits, llm=parent._llm, embed=parent._embed,
                         fork_server=parent._fork_server)
        self.parent_pid = parent.host_pid
        self._sock = sock
        self._owner = parent
        self._view = parent._new_view()

    def attach(self, deadline: float) -> None:
        self._receive_layers(deadline)

    def _strays(self) -> int:
        return len(self._children())  # a reader forks nothing

    def _verify_from_outside(self) -> None:
        """The reader must be a child of the candidate (not the candidate, not anyone else) under its filter."""
        if self.host_pid is None:
            raise ProtocolError("the reader did not name its process")
        if self.host_pid == self.parent_pid:
            raise ProtocolError("the program's process answered as its own reader")
        status = proc_status(self.host_pid)
        if int(status.get("PPid", "0")) != self.parent_pid:
            raise ProtocolError("the reader is not a child of the program's process")
        if status.get("Seccomp", "").strip() != "2":
            raise ProtocolError("the reader runs without the system-call filter")

    def _kill(self) -> None:
        self._signal(signal.SIGKILL)  # the candidate reaps it: it ignores SIGCHLD
        self.exit_status = self.exit_status or {}
        self._release()

    def _death_message(self, what: str) -> str:
        return f"the reader process died during {what}()"
