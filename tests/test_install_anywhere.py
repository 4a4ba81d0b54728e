"""Nothing the engine needs depends on where Python imported it from: the package built and installed as a user
installs it (`pip install .`, not editable) into a folder whose path has spaces, run from another folder with
a home of its own. The seed library, the sandbox's read-only view and numba's cache then come from that
install, and the install is left as it was (numba's compiled loops go to the user's cache folder)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def install(tmp_path_factory) -> Path:
    """``pip install --no-deps --target 'DIR with spaces/site' CHECKOUT`` (the dependencies are the test
    interpreter's own); the package is built from a copy of the checkout like any sdist: setuptools packs
    whatever an earlier build left in the checkout's ``build/`` into the wheel too (a bare ``sandbox`` from
    before it moved), which no user's first install has."""
    base = tmp_path_factory.mktemp("install")
    checkout, site = base / "checkout", base / "a folder with spaces" / "site"
    shutil.copytree(ROOT, checkout, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".pytest_cache", "runs", "site"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                           str(checkout)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"`pip install .` failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}", pytrace=False)
    return site


def _cli(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    home = cwd / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(site), "HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("XDG_CACHE_HOME", None)
    return subprocess.run([sys.executable, "-m", "mstar_ray.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def _files(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*")}


def test_the_installed_package_is_the_one_imported(install, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(install)}
    done = subprocess.run([sys.executable, "-c", "import mstar_ray, mstar_ray.sandbox.wire as w; "
                           "print(mstar_ray.__file__); print(w.__file__)"], cwd=tmp_path, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert all(line.startswith(str(install)) for line in done.stdout.splitlines()), done.stdout
    # the in-sandbox half is a copy inside the package, never a link back to the checkout
    copied = install / "mstar_ray" / "sandbox"
    assert (copied / "wire.py").is_file() and not copied.is_symlink()


def test_no_bare_sandbox_package_is_installed(install):
    """The in-sandbox half goes in as ``mstar_ray.sandbox`` only: a top-level ``sandbox`` would shadow (or be
    shadowed by) any other distribution's module of that name in the user's site-packages."""
    top_level = {p.name for p in install.iterdir() if not p.name.endswith(".dist-info") and p.name != "bin"}
    assert top_level == {"mstar_ray"}


def test_an_unjailed_sandbox_starts_from_the_install(install, tmp_path):
    """Without the jail the fork server's code folder links to the installed package (its parent, ``mstar_ray/``,
    is never on the sandbox's path)."""
    probe = ("from mstar_ray.sandbox_host.fork_server import ForkServer\n"
             "server = ForkServer(test_disable=frozenset({'jail'}))\n"
             "print(server.alive, server.missing.get('jail'))\n"
             "server.close()\n")
    env = {**os.environ, "PYTHONPATH": str(install)}
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.split()[0] == "True", done.stdout + done.stderr[-3000:]


def test_a_search_runs_from_an_install_in_a_path_with_spaces(install, tmp_path):
    before = _files(install)
    work = tmp_path / "my runs"
    work.mkdir()
    config = {"task": {"name": "synthetic", "seed": 1},
              "split": {"static_size": 6, "rotating_size": 2, "train_ratio": 2.0},
              "search": {"seeds": ["vector_search", "experience_learner"], "max_candidates": 1,
                         "reflections_in_flight": 1, "evaluations_in_flight": 1},
              "llm": {"embedding": {"kind": "hashing"}}, "ray": {"num_cpus": 2}}
    (work / "run config.yaml").write_text(yaml.safe_dump(config))
    done = _cli(install, work, "run", "run config.yaml", "--run-dir", "the run")
    assert done.returncode == 0, done.stderr[-5000:]
    assert (work / "the run" / "summary.json").is_file() and (work / "the run" / "best.py").read_text().strip()
    evaluated = _cli(install, work, "eval", str(install / "mstar_ray" / "seeds" / "programs" / "memrl.py"),
                     "--task", "synthetic", "--embedder", "hashing", "--limit", "4")
    assert evaluated.returncode == 0 and "read-only view" in evaluated.stdout, evaluated.stderr[-3000:]
    # the install is as pip left it; numba compiled the structure index's loops into the user's cache
    assert _files(install) == before
    assert list((work / "home" / ".cache" / "mstar-ray" / "numba").rglob("*.nbi"))
