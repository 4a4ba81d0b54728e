"""Fork server: one warm process that forks a fresh sandbox per program.

Importing chromadb costs about a second; forking a process that has already imported it costs a few
milliseconds. The zygote itself never runs candidate code: it imports libraries, then forks on
request. It is started with an environment that holds no secrets, so its children inherit none.

Control channel (SOCK_SEQPACKET, one JSON message per packet):
``{"op": "spawn", "workdir", "limits"}`` + the child's channel fd (SCM_RIGHTS) -> ``{"op": "spawned", "pid"}``;
``{"op": "reap", "pid"}`` -> ``{"op": "reaped", "pid", "exitcode" | "signal"}``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

PRELOAD = ("chromadb", "chromadb.api.rust", "chromadb.config", "numpy", "sqlite3", "json", "re", "dataclasses")


def _preload() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    # Imported here so that forked children pay nothing for them.
    import sandbox.runner  # noqa: F401


def _spawn(request: dict, channel_fd: int, control: socket.socket) -> int:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            control.close()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            from sandbox import runner

            code = runner.serve(socket.socket(fileno=channel_fd), request)
        finally:
            os._exit(code)
    os.close(channel_fd)
    return pid


def _status(status: int) -> dict:
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status)}
    return {"exitcode": os.waitstatus_to_exitcode(status)}


def main(control_fd: int) -> None:
    # A program may write files into its own folder; an empty or relative entry on the import path
    # would let it shadow a module that is imported later.
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p)]
    control = socket.socket(fileno=control_fd)
    try:
        _preload()
        control.send(json.dumps({"op": "ready", "pid": os.getpid()}).encode())
    except Exception as exc:  # tell the host why, instead of dying silently
        control.send(json.dumps({"op": "failed", "error": f"{type(exc).__name__}: {exc}"}).encode())
        return
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, 65536, 1)
        except OSError:
            return
        if not data:
            return
        request = json.loads(data)
        if request["op"] == "spawn":
            reply = {"op": "spawned", "pid": _spawn(request, fds[0], control)}
        elif request["op"] == "reap":
            pid = int(request["pid"])
            _, status = os.waitpid(pid, 0)
            reply = {"op": "reaped", "pid": pid, **_status(status)}
        else:
            reply = {"op": "error", "error": f"unknown op {request['op']!r}"}
        control.send(json.dumps(reply).encode())


