"""Hostile programs against the limits a sandbox holds beyond the kernel's walls: the cap on tasks (threads
and processes) of one sandbox and the count of toolkit requests in one call. Each must end in a clear
violation of that candidate, never in a host failure, and leave the host, a bystander sandbox and the next
candidate as they were (``tests.sandbox_support.Watch``)."""

from __future__ import annotations

import pytest

from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from tests.sandbox_support import FakeEmbed, read
from tests.test_sandbox_hostile import planted_secret, victim, watch  # noqa: F401 - the shared fixtures


def started(outcome) -> tuple[int, int]:
    _, count, _, refused = outcome.value.split()
    return int(count), int(refused)


def test_thousands_of_threads_parked_in_one_call_hit_the_task_cap(watch):
    limits = SandboxLimits(call_timeout_s=30.0, max_tasks=128)
    _, outcome = watch.run("thread_park", [read("park|3000")], limits)
    assert outcome.kind == "tasks" and outcome.violation, outcome.describe()
    assert "cap of 128 tasks" in outcome.message and "refused during read()" in outcome.message


def test_the_cap_holds_when_the_program_goes_around_the_runners_count(watch):
    limits = SandboxLimits(call_timeout_s=30.0, max_tasks=128)
    _, outcome = watch.run("thread_park", [read("raw|3000")], limits)
    if outcome.ok:  # the count was dodged: the kernel's cap still held
        count, refused = started(outcome)
        assert count < 128 and refused == 3000 - count
    else:
        assert outcome.kind == "tasks", outcome.describe()


@pytest.mark.parametrize("how", ["park", "raw"])
def test_threads_below_the_cap_are_an_honest_programs_right(watch, how):
    _, outcome = watch.run("thread_park", [read(f"{how}|60")], SandboxLimits(call_timeout_s=30.0, max_tasks=128))
    assert outcome.ok and started(outcome) == (60, 0), outcome.describe()


@pytest.mark.parametrize("how", ["empty", "tiny", "queries"])
def test_a_flood_of_toolkit_requests_breaks_the_request_count_of_the_call(watch, how):
    embed = FakeEmbed()
    limits = SandboxLimits(call_timeout_s=60.0, toolkit_requests_per_call=100)
    _, outcome = watch.run("request_flood", [read(f"{how}|30000")], limits, embed=embed)
    # "queries" alternates an embedding and a Chroma request: the 101st is a Chroma one
    assert outcome.kind == ("requests" if how == "queries" else "embed_budget") and outcome.violation, outcome.describe()
    assert "101 toolkit requests in one read(); at most 100 allowed" in outcome.message
    assert embed.texts <= 101  # the host stopped embedding at the limit


def test_requests_within_the_count_are_answered(watch):
    limits = SandboxLimits(call_timeout_s=60.0, toolkit_requests_per_call=100)
    # three requests to create and fill the collection, then an embedding and a Chroma request per query
    _, outcome = watch.run("request_flood", [read("queries|48")], limits)
    assert outcome.ok and outcome.value == "answered 48", outcome.describe()
