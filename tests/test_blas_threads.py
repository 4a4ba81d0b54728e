"""Every mstar_ray process runs BLAS on one thread unless told otherwise (mstar_ray.blas), set before numpy
loads: checked in fresh processes, by the variables and by the threads OpenBLAS actually started."""

from __future__ import annotations

import os
import subprocess
import sys

from mstar_ray.blas import ONE_THREAD

PROBE = ("import {module}, os, sys, numpy; "
         "print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['MKL_NUM_THREADS'], len(os.listdir('/proc/self/task')))")


def _run(module: str, **extra: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ONE_THREAD}
    env.update(extra)
    done = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout.split()


def test_the_cli_process_pins_blas_before_numpy_loads() -> None:
    # numpy imported after the CLI module: OpenBLAS then starts no thread besides the main one.
    assert _run("mstar_ray.cli") == ["1", "1", "1"]


def test_the_driver_process_pins_blas() -> None:
    assert _run("mstar_ray.driver.run")[:2] == ["1", "1"]


def test_an_explicit_choice_is_kept() -> None:
    assert _run("mstar_ray", OPENBLAS_NUM_THREADS="2", MKL_NUM_THREADS="3")[:2] == ["2", "3"]


def test_sandboxes_always_get_one_thread(monkeypatch) -> None:
    from mstar_ray.sandbox_host.fork_server import sandbox_environment

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "8")
    env = sandbox_environment("/nowhere")
    assert {name: env[name] for name in ONE_THREAD} == ONE_THREAD


RAY_PROBE = """
import os, ray
from mstar_ray.driver.cluster import connect
from mstar_ray.run_config import RunConfig
connect(RunConfig.model_validate({"ray": {"num_cpus": 1}}), None)
@ray.remote
def variables():
    return [os.environ.get(name) for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")]
print(*ray.get(variables.remote()))
ray.shutdown()
"""


def test_the_workers_of_a_local_ray_get_one_thread() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ONE_THREAD}
    done = subprocess.run([sys.executable, "-c", RAY_PROBE], env=env, capture_output=True, text=True, check=True,
                          timeout=300)
    assert done.stdout.split()[-3:] == ["1", "1", "1"]
