"""Fork server: one warm process that forks a fresh sandbox per program.

Importing chromadb costs about a second; forking a process that has already imported it costs a few
milliseconds. A fork server preloads Chroma only to fork programs' Chroma processes (``settings["chroma"]``,
``chroma_store``); programs' own processes come from one without it. The
zygote never runs candidate code: it imports libraries, then forks on request. It runs inside the jail the
host built for it (``mstar_ray.sandbox_host.jail``), with an environment that holds no secrets, and is not
dumpable, so nothing running as the same user can trace it or read its memory.

Each spawn forks a keeper, which enters the candidate's own namespaces (``sandbox.namespaces``) and
forks the candidate; the keeper waits for it and exits the way it did, so the zygote reaps one process
per candidate. Before every fork the zygote compares its own limits, priority, CPUs and scheduling
policy with those it recorded at start: a process that changed them from outside (``prlimit`` on the
fork server) would hand every later candidate a broken start, so the zygote refuses and exits, and the
host starts a clean one.

Control channel (SOCK_SEQPACKET, one JSON message per packet):
``{"op": "spawn", "limits"}`` + the child's channel fd (SCM_RIGHTS) -> ``{"op": "spawned", "pid"}``
or ``{"op": "poisoned", "detail"}``; ``{"op": "reap", "pid"}`` -> ``{"op": "reaped", "pid",
"exitcode" | "signal"}``; ``{"op": "kill", "pid"}`` -> ``{"op": "killed", "pid"}``.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import signal
import socket
import sys
from typing import Any

from . import namespaces, oslayers, runner, seccomp
from .libc import libc

PRELOAD = ("numpy", "sqlite3", "json", "re", "dataclasses")
# Preloaded only by the fork server of programs' Chroma processes: a process that imported its Rust bindings
# takes about 8x as long to fork (their mappings are copied), and a program's own process never uses them.
CHROMA = ("chromadb", "chromadb.api.rust", "chromadb.config")


def _preload(chroma: bool) -> None:
    """Imported and built here, so that forked children pay nothing for them."""
    import importlib

    for name in (*CHROMA, *PRELOAD) if chroma else PRELOAD:
        importlib.import_module(name)
    if platform.machine() in seccomp.NUMBERS:
        seccomp.packed_filter(platform.machine(), 1)  # a candidate is PID 1 of its own namespace
        seccomp.packed_filter(platform.machine(), 1, True)  # and one that forks its readers


def _keeper(request: dict[str, Any], channel_fd: int, workdir: str, settings: dict[str, Any], baseline: dict[str, Any]) -> int:
    """The zygote's child: give the candidate its namespaces, fork it, outlive it, report how it ended."""
    oslayers.die_with_parent()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    missing: dict[str, str] = {}
    isolated = False
    if "namespaces" in settings["disable"]:
        missing["namespaces"] = "disabled (test mode)"
    else:
        try:
            namespaces.enter()
            isolated = True
        except OSError as exc:
            missing["namespaces"] = str(exc)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = runner.serve(channel_fd, request, workdir, isolated, missing, baseline, settings["disable"])
        finally:
            os._exit(code)
    os.close(channel_fd)
    _, status, usage = os.wait4(pid, 0)
    if not os.WIFSIGNALED(status):
        return os.waitstatus_to_exitcode(status)
    sig = os.WTERMSIG(status)
    # As PID 1 of its namespace the candidate ignores SIGXCPU, so the CPU limit ends it with SIGKILL;
    # its CPU time says which it was.
    if sig == signal.SIGKILL and usage.ru_utime + usage.ru_stime >= request["limits"]["cpu_seconds"] - 0.5:
        sig = signal.SIGXCPU
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    os.kill(os.getpid(), sig)
    return 128 + sig


class Zygote:
    def __init__(self, control: socket.socket, settings: dict[str, Any]):
        self.control = control
        self.settings = settings
        self.scratch = settings["scratch"]
        self.baseline = oslayers.process_state()
        self.children: dict[int, str] = {}  # keeper pid -> its candidate's folder
        self.spawned = 0

    def poisoned(self) -> str | None:
        now = oslayers.process_state()
        changed = [key for key in self.baseline if now[key] != self.baseline[key]]
        return None if not changed else f"the fork server's {', '.join(changed)} changed since it started: {now}"

    def spawn(self, request: dict[str, Any], channel_fd: int) -> dict[str, Any]:
        problem = self.poisoned()
        if problem is not None:
            os.close(channel_fd)
            return {"op": "poisoned", "detail": problem}
        self.spawned += 1
        workdir = os.path.join(self.scratch, f"c{self.spawned}")
        os.mkdir(workdir, 0o700)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                self.control.close()
                code = _keeper(request, channel_fd, workdir, self.settings, self.baseline)
            finally:
                os._exit(code)
        os.close(channel_fd)
        self.children[pid] = workdir
        return {"op": "spawned", "pid": pid}

    def reap(self, pid: int) -> dict[str, Any]:
        if pid not in self.children:
            return {"op": "error", "error": f"no candidate {pid}"}
        _, status = os.waitpid(pid, 0)
        # Without namespaces of its own the candidate wrote into this folder itself; with them, the
        # folder was only its mount point.
        shutil.rmtree(self.children.pop(pid), ignore_errors=True)
        if os.WIFSIGNALED(status):
            return {"op": "reaped", "pid": pid, "signal": os.WTERMSIG(status)}
        return {"op": "reaped", "pid": pid, "exitcode": os.waitstatus_to_exitcode(status)}

    def kill(self, pid: int) -> dict[str, Any]:
        if pid in self.children:  # never a pid already reaped, which the kernel may have reused
            os.kill(pid, signal.SIGKILL)
        return {"op": "killed", "pid": pid}

    def serve(self) -> None:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.control, 65536, 1)
            except OSError:
                return
            if not data:
                return
            request = json.loads(data)
            if request["op"] == "spawn":
                reply = self.spawn(request, fds[0])
            elif request["op"] == "reap":
                reply = self.reap(int(request["pid"]))
            elif request["op"] == "kill":
                reply = self.kill(int(request["pid"]))
            else:
                reply = {"op": "error", "error": f"unknown op {request['op']!r}"}
            self.control.send(json.dumps(reply).encode())
            if reply["op"] == "poisoned":
                return


def _identity() -> dict[str, Any]:
    status = {}
    with open("/proc/self/status") as file:
        for line in file:
            key, _, value = line.partition(":")
            if key in ("NoNewPrivs", "Seccomp"):
                status[key] = value.strip()
    return {"uid": os.getuid(), "gid": os.getgid(), "caps": namespaces.capability_sets(), **status}


def main(control_fd: int, settings_json: str) -> None:
    settings = json.loads(settings_json)
    # A program may write files into its own folder; an empty or relative entry on the import path
    # would let it shadow a module that is imported later.
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p)]
    control = socket.socket(fileno=control_fd)
    try:
        oslayers.die_with_parent()
        libc.prctl(namespaces.PR_SET_DUMPABLE, 0, 0, 0, 0)
        _preload(settings["chroma"])
        control.send(json.dumps({"op": "ready", "pid": os.getpid(), **_identity()}).encode())
    except Exception as exc:  # tell the host why, instead of dying silently
        control.send(json.dumps({"op": "failed", "error": f"{type(exc).__name__}: {exc}"}).encode())
        return
    # From here on nothing is printed; a full stderr pipe must never block a fork.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 2)
    os.close(devnull)
    Zygote(control, settings).serve()
