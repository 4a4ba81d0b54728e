"""A local Ray whose node misses Ray's fixed 30 s registration window (a busy machine) is started again, and after
``LOCAL_STARTS`` misses the machine is named (an infrastructure error, exit 3), never an internal error.

Ray cannot be made to miss its window on demand, so its failed start is stood in for by raising Ray's own message
from ``ray.init``; the start that succeeds is a real one."""

from __future__ import annotations

import pytest
import ray

from mstar_ray.driver import cluster
from mstar_ray.exit_codes import InfrastructureError

RAY_MESSAGE = ("The current node timed out during startup. This could happen because some of the raylet failed to "
               "startup or the GCS has become overloaded.")


def _missing(times: int, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    calls: list[dict[str, object]] = []
    real = ray.init

    def init(**options: object) -> object:
        calls.append(options)
        if len(calls) <= times:
            raise Exception(RAY_MESSAGE)
        return real(**options)

    monkeypatch.setattr(cluster.ray, "init", init)
    return calls


def test_a_node_that_misses_its_window_is_started_again(monkeypatch: pytest.MonkeyPatch):
    calls = _missing(cluster.LOCAL_STARTS - 1, monkeypatch)
    try:
        cluster.start_local_ray(num_cpus=1, include_dashboard=False, log_to_driver=False)
        assert ray.is_initialized() and len(calls) == cluster.LOCAL_STARTS
        assert all(c["address"] == "local" for c in calls)
    finally:
        ray.shutdown()


def test_every_start_missing_names_the_machine(monkeypatch: pytest.MonkeyPatch):
    calls = _missing(cluster.LOCAL_STARTS, monkeypatch)
    with pytest.raises(InfrastructureError, match="overloaded"):
        cluster.start_local_ray(num_cpus=1)
    assert len(calls) == cluster.LOCAL_STARTS and not ray.is_initialized()


def test_any_other_failure_is_raised_as_it_is(monkeypatch: pytest.MonkeyPatch):
    def init(**options: object) -> None:
        raise ValueError("num_cpus must be positive")

    monkeypatch.setattr(cluster.ray, "init", init)
    with pytest.raises(ValueError, match="num_cpus"):
        cluster.start_local_ray(num_cpus=-1)
