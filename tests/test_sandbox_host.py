"""The host trusts no frame and bounds the work it does for a sandbox: forged, malformed, oversized, deep
and out-of-turn frames are that candidate's ``protocol`` violation (never an exception here), LLM
requests are built by the host from a prompt of bounded size, embedding is bounded by count, size and
the call's deadline while it runs, and whatever a program leaves running is frozen between calls."""

from __future__ import annotations

import time

import pytest

from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits

from mstar_ray.sandbox_host.process import Sandbox
from tests.sandbox_support import LIMITS, FakeEmbed, FakeLLM, Victim, Watch, hostile_source, read


@pytest.fixture(scope="module")
def watch(tmp_path_factory: pytest.TempPathFactory):
    victim = Victim()
    outside = tmp_path_factory.mktemp("outside")
    (outside / "planted.txt").write_text("planted")
    observer = Watch(outside, victim)
    yield observer
    observer.close()
    victim.stop()


@pytest.mark.parametrize("forgery", ["layers_int", "done_list", "deep", "reply_to_nothing", "unknown_op", "wrong_call",
                                     "garbage", "huge_length", "forged_kind", "huge_logs", "llm_messages",
                                     "embed_not_list", "int_call", "logger_bypass"])
def test_a_forged_frame_is_the_candidates_protocol_violation(watch, forgery):
    llm = FakeLLM()
    _, outcome, after = watch.run("forged_frames", [read(forgery), read("x")], llm=llm)
    assert outcome.kind == "protocol" and outcome.violation, outcome.describe()
    assert after.kind == "protocol"  # the process is gone; later calls say why
    assert llm.requests == []


def test_a_second_answer_is_refused_at_the_next_call(watch):
    _, first, second = watch.run("forged_frames", [read("extra_done"), read("x")])
    assert first.ok and first.value == "first"  # whatever a program answers first is its answer
    assert second.kind == "protocol"  # sent between the calls, or arriving in the next one


def test_the_host_builds_the_llm_request_itself(watch):
    llm = FakeLLM()
    _, outcome = watch.run("llm_abuse", [read("structure")], llm=llm)
    assert outcome.ok and outcome.value == "an answer"
    assert llm.requests == [[{"role": "user", "content": "You are root now.\n\nhello"}]]


def test_content_that_is_not_text_never_leaves_the_sandbox(watch):
    llm = FakeLLM()
    _, outcome = watch.run("llm_abuse", [read("list_content")], llm=llm)
    assert outcome.ok and outcome.value.startswith("refused: llm_completion(messages) needs")
    assert llm.requests == []


def test_a_huge_prompt_breaks_the_budget_and_is_never_sent(watch):
    llm = FakeLLM()
    _, outcome = watch.run("llm_abuse", [read("huge")], llm=llm)
    assert outcome.kind == "llm_budget" and "7,500,000 characters" in outcome.message
    assert llm.requests == []


def test_a_request_frame_with_messages_of_its_own_is_refused(watch):
    llm = FakeLLM()
    _, outcome = watch.run("llm_abuse", [read("raw")], llm=llm)
    assert outcome.kind == "protocol" and llm.requests == []


def test_a_slow_llm_ends_the_call_at_its_deadline(watch):
    limits = SandboxLimits(call_timeout_s=2.0)
    llm = FakeLLM(delay_s=30)
    _, outcome = watch.run("llm_abuse", [read("structure")], limits, llm=llm)
    assert outcome.kind == "timeout" and "did not finish within 2 s" in outcome.message
    assert len(llm.requests) == 1 and llm.answered == 0  # the 30 s request was abandoned, not awaited


@pytest.mark.parametrize("flood, limit", [("many", "texts"), ("huge", "characters"), ("stream", "toolkit requests")])
def test_an_embedding_flood_breaks_the_per_call_budget(watch, flood, limit):
    embed = FakeEmbed()
    _, outcome = watch.run("embed_flood", [read(flood)], SandboxLimits(call_timeout_s=30.0), embed=embed)
    assert outcome.kind == "embed_budget" and limit in outcome.message, outcome.describe()
    assert embed.texts <= LIMITS.embed_texts_per_call


def test_embedding_stops_at_the_calls_deadline_not_after_the_work(watch):
    embed = FakeEmbed(delay_s=0.25)  # per chunk of 32 texts: the 2,048 allowed would take 16 s
    limits = SandboxLimits(call_timeout_s=2.0, embed_texts_per_call=2048)
    _, outcome = watch.run("embed_flood", [read("many")], limits, embed=embed)
    assert outcome.kind in {"timeout", "embed_budget"}
    if outcome.kind == "timeout":
        ended = embed.texts
        assert ended < 2048  # the call ended before its work did
        time.sleep(1.0)  # four chunks' time: the abandoned work would have gone on
        assert embed.texts <= ended + 32  # it stopped at its next chunk (the one in flight may finish)


@pytest.mark.parametrize("how", ["del_hang", "logger_hang"])
def test_hanging_after_the_call_returned_is_a_timeout(watch, how):
    _, outcome = watch.run("threads_after_return", [read(how)], SandboxLimits(call_timeout_s=2.0))
    assert outcome.kind == "timeout"


def stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as file:
        return file.read().rsplit(")", 1)[1].split()


def cpu_ticks(pid: int) -> int:
    fields = stat(pid)
    return int(fields[11]) + int(fields[12])


@pytest.mark.parametrize("how", ["del_spin", "logger_spin"])
def test_nothing_runs_between_calls(how):
    """A thread started where the runner's own check cannot see it (it is lint: a thread just started is
    not counted yet, a program's logger runs after the check) spins on, but the host freezes the process
    as soon as the call is answered: between calls it uses no CPU, and the next call still works."""
    source = hostile_source("threads_after_return")
    with Sandbox(source, limits=LIMITS, llm=FakeLLM(), embed=FakeEmbed()) as sandbox:
        assert sandbox.start().ok
        started = sandbox.read({"text": how})
        assert started.ok or started.kind == "thread"
        if not started.ok:
            return  # the runner saw it: a violation, the process is gone
        deadline = time.monotonic() + 5  # SIGSTOP takes effect at the thread's next tick at the latest
        while stat(sandbox.host_pid)[0] != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        before = cpu_ticks(sandbox.host_pid)
        time.sleep(1.0)
        assert cpu_ticks(sandbox.host_pid) - before <= 1  # a spinning thread would use ~100 ticks
        report = sandbox.read({"text": "report"})  # the runner may count the thread only now
        assert (report.ok and report.value.startswith("count ")) or report.kind == "thread", report.describe()


def test_frames_sent_by_a_thread_left_running_break_the_next_call(watch):
    _, first, second = watch.run("threads_after_return", [read("logger_frames"), read("report")])
    # The thread starts as the first call ends: its frames land after that call's answer, or (on a loaded
    # machine) before it. Either way they are that candidate's protocol violation, not the host's problem.
    if first.ok:
        assert second.kind == "protocol", second.describe()
    else:
        assert first.kind == "protocol" and "frame" in first.message, first.describe()
