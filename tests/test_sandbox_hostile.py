"""Every hostile program runs in a real sandbox process; each must end in a clear violation or error,
leave the host, a bystander sandbox and the file system untouched, and never see a secret."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from mstar_ray.sandbox_host import Outcome, Sandbox, SandboxLimits
from tests.conftest import HOSTILE, seed_source

SECRET = "sk-test-mstar-planted-secret-0123456789"
LIMITS = SandboxLimits(call_timeout_s=3.0)


def fake_llm(messages: list[dict[str, str]]) -> str:
    return "an answer"


def fake_embed(texts: list[str]) -> list[list[float]]:
    return [[float(len(t) % 7), 1.0, 0.5] for t in texts]


@pytest.fixture(autouse=True)
def planted_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)


@pytest.fixture(scope="module")
def bystander():
    """A benign program that keeps running beside every hostile one."""
    with Sandbox(seed_source("experience_learner"), limits=LIMITS) as sandbox:
        assert sandbox.start().ok
        assert sandbox.write({"lesson": "l", "fact": "Alice lives in Lisbon"}, "raw").ok
        yield sandbox


@pytest.fixture(autouse=True)
def outside(tmp_path: Path):
    """A folder outside every sandbox, with a planted file; after every test it must be unchanged."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "planted.txt").write_text("planted content " + SECRET)
    before = snapshot(folder)
    yield folder
    assert snapshot(folder) == before, "a hostile program changed a folder outside its sandbox"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run_hostile(name: str, calls: list[tuple[str, dict]], bystander: Sandbox, limits: SandboxLimits = LIMITS) -> list[Outcome]:
    source = (HOSTILE / f"{name}.py").read_text()
    outcomes = []
    with Sandbox(source, limits=limits, llm=fake_llm, embed=fake_embed) as sandbox:
        outcomes.append(sandbox.start())
        for op, args in calls:
            outcomes.append(getattr(sandbox, op)(**args))
        workdir = sandbox.workdir
        assert sandbox.layers, "the sandbox reported no isolation layers"
    assert not os.path.exists(workdir), "the sandbox folder was not deleted"
    # The host and the other sandboxes carry on.
    check = bystander.read({"topic": "Alice"})
    assert check.ok and "Lisbon" in check.value
    for outcome in outcomes:
        assert SECRET not in outcome.model_dump_json()
    return outcomes


WRITE = ("write", {"item": {"text": "t"}, "raw_text": "t"})


def read(text: str = "q") -> tuple[str, dict]:
    return ("read", {"query": {"text": text}})


def test_infinite_loop_in_write_is_killed_at_the_deadline(bystander):
    started = time.monotonic()
    load, write, again = run_hostile("loop_in_write", [WRITE, read()], bystander)
    assert load.ok
    assert write.kind == "timeout" and "killed" in write.message
    assert write.violation
    assert again.kind == "timeout"  # the dead sandbox keeps answering with its cause
    assert time.monotonic() - started < 15


def test_busy_loop_in_read_is_killed_at_the_deadline(bystander):
    _, _, outcome = run_hostile("busy_read", [WRITE, read()], bystander)
    assert outcome.kind == "timeout" and "read()" in outcome.message


def test_constructor_that_never_returns_is_killed(bystander):
    (load,) = run_hostile("loop_in_init", [], bystander)
    assert load.kind == "timeout" and "load()" in load.message


def test_memory_bomb_hits_the_memory_limit(bystander):
    limits = SandboxLimits(call_timeout_s=20.0, memory_mb=1024)
    _, write = run_hostile("memory_bomb", [WRITE], bystander, limits)
    assert write.kind == "memory" and write.violation


def test_fork_bomb_is_refused(bystander):
    _, write = run_hostile("fork_bomb", [WRITE], bystander)
    # Caught by the program, the refusal is still reported by the hook the moment it happens.
    assert write.kind == "forbidden" and "os.fork" in write.message


def test_subprocess_spawn_is_refused_and_nothing_runs(bystander, outside):
    target = outside / "pwned.txt"
    _, outcome = run_hostile("subprocess_spawn", [read(str(target))], bystander)
    assert outcome.kind == "forbidden" and "subprocess.Popen" in outcome.message
    assert not target.exists()


def test_socket_connect_to_a_listening_port_never_arrives(bystander):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    arrived: list[object] = []

    def accept() -> None:
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            try:
                arrived.append(listener.accept())
            except (TimeoutError, OSError):
                continue

    watcher = threading.Thread(target=accept)
    watcher.start()
    _, outcome = run_hostile("socket_connect", [read(str(port))], bystander)
    watcher.join()
    listener.close()
    assert outcome.kind == "forbidden" and "socket" in outcome.message
    assert arrived == []


def test_environment_secrets_never_reach_the_program(bystander):
    _, outcome = run_hostile("env_secret", [read()], bystander)
    # Its own environment holds nothing; reaching for the host's /proc entry is a violation.
    assert outcome.kind == "forbidden" and "environ" in outcome.message


def test_reading_a_file_outside_the_sandbox_is_refused(bystander, outside):
    _, outcome = run_hostile("read_outside", [read(str(outside / "planted.txt"))], bystander)
    assert outcome.kind == "forbidden" and "outside the sandbox folder" in outcome.message
    assert outcome.value is None


def test_writing_outside_the_sandbox_is_refused(bystander, outside):
    _, outcome = run_hostile("write_outside", [read(str(outside / "written"))], bystander)
    assert outcome.kind == "forbidden" and "outside the sandbox folder" in outcome.message
    assert not list(outside.glob("written*"))


def test_printing_100_mb_cannot_break_the_protocol(bystander):
    _, write, answer = run_hostile("print_flood", [WRITE, read()], bystander)
    assert write.ok, write.describe()
    assert answer.ok and answer.value == "count=1"


def test_os_exit_in_write_is_a_crash_with_its_exit_code(bystander):
    _, write = run_hostile("exit_in_write", [WRITE], bystander)
    assert write.kind == "crashed" and "exited with code 0 during write()" in write.message


def test_two_llm_calls_in_one_read_break_the_budget(bystander):
    _, outcome = run_hostile("two_llm_calls", [read()], bystander)
    assert outcome.kind == "llm_budget" and "2 toolkit LLM calls" in outcome.message
    assert outcome.llm_calls == 2


def test_returning_10000_characters_is_a_violation(bystander):
    _, outcome = run_hostile("long_read", [read()], bystander)
    assert outcome.kind == "read_too_long" and "10,000" in outcome.message


def test_an_exception_is_reported_with_the_programs_traceback(bystander):
    _, outcome, again = run_hostile("raises", [read(), read()], bystander)
    assert outcome.kind == "exception" and not outcome.violation
    assert "ValueError: deliberate failure in read" in outcome.message
    assert "program.py" in outcome.traceback
    assert again.kind == "exception"  # an ordinary error does not kill the sandbox


def test_unbounded_recursion_is_reported(bystander):
    _, write = run_hostile("recursion", [WRITE], bystander)
    assert write.kind == "recursion" and "RecursionError" in write.message


def test_a_thread_left_running_is_a_violation(bystander):
    _, write = run_hostile("thread_left_running", [WRITE], bystander)
    assert write.violation
    assert write.kind in {"thread", "llm_budget", "protocol"}
    assert "thread" in write.message or "LLM" in write.message or "unexpected" in write.message


def test_importing_ctypes_fails_to_load(bystander):
    (load,) = run_hostile("import_ctypes", [], bystander)
    assert not load.ok and "import of 'ctypes' is not allowed" in load.message


def test_ctypes_through_importlib_is_refused(bystander, outside):
    _, outcome = run_hostile("importlib_trick", [read(str(outside / "pwned"))], bystander)
    assert outcome.kind == "forbidden" and "ctypes" in outcome.message
    assert not (outside / "pwned").exists()
