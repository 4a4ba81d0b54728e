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

from mstar_ray import sandbox_jail
from tests.conftest import ROOT

SUITES = ("tests/test_sandbox_hostile.py", "tests/test_sandbox_host.py", "tests/test_sandbox_layers.py")


def _cannot(reason: str) -> None:
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"the unprivileged sandbox pass cannot run: {reason} (CI=true: it must not be skipped)",
                    pytrace=False)
    pytest.skip(reason)


def test_the_sandbox_suites_pass_as_an_unprivileged_user():
    if os.geteuid() != 0:
        pytest.skip("this run is unprivileged already: the sandbox suites ran as this user")
    bwrap = sandbox_jail.find_bwrap()
    if bwrap is None:
        _cannot("no bwrap to build the unprivileged user's view with")
    home = tempfile.mkdtemp(prefix="mstar-nobody-")  # pytest's own temporary folders are root's alone
    try:
        summary = _run_as_nobody(bwrap, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"as uid {sandbox_jail.JAIL_UID}: {summary}")


def _run_as_nobody(bwrap: sandbox_jail.Bwrap, home: str) -> str:
    os.chown(home, sandbox_jail.JAIL_UID, sandbox_jail.JAIL_GID)
    basetemp = os.path.join(home, "pytest")
    paths = [*sandbox_jail.read_only_paths(), str(ROOT), sys.executable, bwrap.path]
    command = sandbox_jail.as_nobody(bwrap, paths, [
        sys.executable, "-m", "pytest", *SUITES, "-q", "-p", "no:cacheprovider", "-n", "0", "-m", "not slow",
        f"--basetemp={basetemp}"])
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "PYTHONDONTWRITEBYTECODE": "1",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "CI": os.environ.get("CI", "")}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0 and " passed" in summary and "failed" not in summary, \
        f"as uid {sandbox_jail.JAIL_UID}: {summary}\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    return summary
