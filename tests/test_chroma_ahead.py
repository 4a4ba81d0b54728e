"""A Chroma process started ahead: a program that keeps vectors gets one that was ready before it started (one
per set of limits), never one that died or spoke while it waited."""

from __future__ import annotations

import os
import signal
import time

from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.sandbox_host import chroma_process
from mstar_ray.sandbox_host.chroma_process import ChromaProcess
from mstar_ray.sandbox_host.process import Sandbox
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from tests.test_snapshot_readers import HEAD

LIMITS = SandboxLimits(call_timeout_s=20.0, max_tasks=32)
NOTES = HEAD + '''
class KnowledgeBase:
    def __init__(self, toolkit):
        self.notes = toolkit.chroma.get_or_create_collection("notes")
    def write(self, item, raw_text):
        self.notes.add(ids=[raw_text], documents=[raw_text])
    def read(self, query):
        return ",".join(self.notes.get()["ids"])
'''


def _served(limits: SandboxLimits = LIMITS) -> ChromaProcess:
    """Run the program once under ``limits``: the Chroma process it was served by (closed with it)."""
    with Sandbox(NOTES, limits=limits, embed=HashingEmbedder().embed) as sandbox:
        assert sandbox.start().ok and sandbox.write({"text": "a"}, "a").ok
        assert sandbox.read({"text": "q"}).value == "a"
        assert sandbox._store is not None and sandbox._store.limits == limits
        return sandbox._store


def _none_waiting() -> None:
    """No process started ahead by an earlier test, waiting or still starting: each test counts its own."""
    deadline = time.monotonic() + 60
    while chroma_process._ahead._starting and time.monotonic() < deadline:
        time.sleep(0.05)
    chroma_process._ahead.close()


def _waiting(limits: SandboxLimits) -> ChromaProcess:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        waiting = chroma_process._ahead._ready.get(limits.model_dump_json())
        if waiting is not None:
            return waiting
        time.sleep(0.05)
    raise AssertionError("no Chroma process was started ahead")


def test_a_program_gets_the_chroma_process_started_ahead_and_the_next_one_starts():
    _none_waiting()
    _served()
    waiting = _waiting(LIMITS)
    before = time.monotonic()
    store = _served()
    assert store.host_pid == waiting.host_pid and store.begun_at is not None and store.begun_at < before
    assert _waiting(LIMITS).host_pid != store.host_pid  # the next, started while this one served


def test_one_that_died_while_it_waited_is_not_handed_to_a_program():
    _none_waiting()
    _served()
    waiting = _waiting(LIMITS)
    assert waiting.host_pid is not None
    os.kill(waiting.host_pid, signal.SIGKILL)
    store = _served()  # a program served by a fresh one, with no violation of its own
    assert store.host_pid != waiting.host_pid


def test_one_started_ahead_serves_only_the_limits_it_was_started_under():
    _none_waiting()
    _served()
    waiting = _waiting(LIMITS)
    other = LIMITS.model_copy(update={"call_timeout_s": 21.0})
    store = _served(other)
    assert store.host_pid != waiting.host_pid
    assert _waiting(LIMITS).host_pid == waiting.host_pid  # still there for its own limits
