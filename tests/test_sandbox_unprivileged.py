"""The sandbox suites once more as an unprivileged user, in the same pytest run: when this run is root,
they are re-run as nobody (uid and gid 65534, no groups, no capabilities) in a private mount view where
nobody can reach the interpreter (the view the jail itself uses when the host is root). Under CI=true a
pass that cannot run is a failure, never a silent skip."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest
import yaml

from mstar_ray.sandbox_host import jail
from tests.conftest import ROOT

SUITES = ("tests/test_sandbox_hostile.py", "tests/test_sandbox_host.py", "tests/test_sandbox_layers.py")


def _cannot(reason: str) -> None:
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"the unprivileged sandbox pass cannot run: {reason} (CI=true: it must not be skipped)",
                    pytrace=False)
    pytest.skip(reason)


def _as_nobody_with_a_home(run) -> None:
    """``run(bwrap, home)`` as root, with ``home`` a fresh folder owned by nobody (pytest's own temporary
    folders are root's alone); skips (or in CI fails) where the unprivileged pass cannot run."""
    if os.geteuid() != 0:
        pytest.skip("this run is unprivileged already: the suites and commands ran as this user")
    bwrap = jail.find_bwrap()
    if bwrap is None:
        _cannot("no bwrap to build the unprivileged user's view with")
    home = tempfile.mkdtemp(prefix="mstar-nobody-")
    try:
        os.chown(home, jail.JAIL_UID, jail.JAIL_GID)
        run(bwrap, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_the_sandbox_suites_pass_as_an_unprivileged_user():
    _as_nobody_with_a_home(_sandbox_suites)


def _sandbox_suites(bwrap: jail.Bwrap, home: str) -> None:
    basetemp = os.path.join(home, "pytest")
    done = _nobody(bwrap, home, [sys.executable, "-m", "pytest", *SUITES, "-q", "-p", "no:cacheprovider", "-n", "0",
                                 "-m", "not slow", f"--basetemp={basetemp}"])
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0 and " passed" in summary and "failed" not in summary, \
        f"as uid {jail.JAIL_UID}: {summary}\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    print(f"as uid {jail.JAIL_UID}: {summary}")


def test_a_search_runs_and_is_inspected_as_an_unprivileged_user():
    """README command 1's path as an ordinary user: `mstar-ray run` (a local Ray, sandboxes, the MiniLM
    embedder from the installed package) with its run directory and Ray's token in that user's home, then
    `status` and `export` on the run."""
    _as_nobody_with_a_home(_search)


def _search(bwrap: jail.Bwrap, home: str) -> None:
    from scripts.fault_resume import config

    settings = config(2)
    settings["llm"] = {"embedding": {"kind": "minilm"}}
    path = os.path.join(home, "run.yaml")
    with open(path, "w") as file:
        yaml.safe_dump(settings, file)
    os.chown(path, jail.JAIL_UID, jail.JAIL_GID)
    run_dir, best = os.path.join(home, "run"), os.path.join(home, "best.py")
    cli = [sys.executable, "-m", "mstar_ray.cli"]
    done = _nobody(bwrap, home, [*cli, "run", path, "--run-dir", run_dir])
    assert done.returncode == 0, f"as uid {jail.JAIL_UID}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert "WARNING" not in done.stderr, done.stderr  # no start-up warning a user cannot act on
    status = _nobody(bwrap, home, [*cli, "status", run_dir])
    assert status.returncode == 0 and "best" in status.stdout, status.stderr[-3000:]
    export = _nobody(bwrap, home, [*cli, "export", run_dir, "--best", best])
    assert export.returncode == 0 and os.path.getsize(best) > 0, export.stderr[-3000:]
    assert os.stat(run_dir).st_uid == jail.JAIL_UID  # written by that user, nothing as root


def _nobody(bwrap: jail.Bwrap, home: str, command: list[str]) -> subprocess.CompletedProcess:
    """``command`` as nobody (uid and gid 65534, no groups, no capabilities), in a view where nobody reaches
    the checkout, the interpreter and bwrap, with ``home`` as its home directory."""
    paths = [*jail.read_only_paths(), str(ROOT), sys.executable, bwrap.path]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "PYTHONDONTWRITEBYTECODE": "1",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "CI": os.environ.get("CI", "")}
    return subprocess.run(jail.as_nobody(bwrap, paths, command), cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1800)
