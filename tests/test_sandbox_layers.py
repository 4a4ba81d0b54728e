"""The kernel layers hold on their own: with no audit hook and no restricted namespace, a process that
applied them still cannot fork, open sockets, reach the network, leave its folder or signal others."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT

PROBE = textwrap.dedent(
    """
    import errno, json, os, socket, sys  # noqa: E401
    from sandbox import oslayers, guard
    workdir, outside, port, host_pid = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    results = {}

    def attempt(name, fn):
        try:
            fn()
            results[name] = "allowed"
        except OSError as exc:
            results[name] = errno.errorcode.get(exc.errno, str(exc.errno))

    host_netns = os.open("/proc/self/ns/net", os.O_RDONLY)  # a handle on the host's network, kept open
    results["netns"] = oslayers.isolate_network()
    def connect():
        s = socket.socket()
        s.settimeout(2)
        s.connect(("127.0.0.1", port))
    attempt("connect_in_netns", connect)
    results["landlock"] = oslayers.restrict_filesystem(workdir, guard.readable_roots())
    results["seccomp"] = oslayers.install_seccomp()
    attempt("fork", os.fork)
    attempt("socket", socket.socket)
    attempt("read_outside", lambda: open(os.path.join(outside, "planted.txt")).read())
    attempt("write_outside", lambda: open(os.path.join(outside, "new.txt"), "w").write("x"))
    attempt("host_environ", lambda: open(f"/proc/{host_pid}/environ").read())
    attempt("write_inside", lambda: open(os.path.join(workdir, "ok.txt"), "w").write("x"))
    attempt("kill_host", lambda: os.kill(host_pid, 0))
    def setns():
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(host_netns, 0) != 0:
            raise OSError(ctypes.get_errno(), "setns")
    attempt("setns", setns)
    print(json.dumps(results))
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="Linux kernel layers")
def test_kernel_layers_hold_without_the_python_guards(tmp_path: Path):
    workdir, outside = tmp_path / "work", tmp_path / "outside"
    workdir.mkdir()
    outside.mkdir()
    (outside / "planted.txt").write_text("secret")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(workdir), str(outside), str(port), str(os.getpid())],
        capture_output=True, text=True, timeout=60, env=env,
    )
    listener.close()
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert results["connect_in_netns"] in {"ENETUNREACH", "ECONNREFUSED", "EHOSTUNREACH"}
    assert results["fork"] == "EPERM"
    assert results["socket"] == "EPERM"
    assert results["read_outside"] == "EACCES"
    assert results["write_outside"] == "EACCES"
    assert results["host_environ"] == "EACCES"
    assert results["write_inside"] == "allowed"
    assert results["kill_host"] == "EPERM"
    assert results["setns"] == "EPERM"
    assert not (outside / "new.txt").exists()


def test_seccomp_program_resolves_every_jump():
    from sandbox.oslayers import _seccomp_program

    for machine in ("x86_64", "aarch64"):
        program = _seccomp_program(machine, 1234)
        assert all(0 <= jt < 256 and 0 <= jf < 256 for _, jt, jf, _ in program)
        assert program[-1][3] & 0xFFFF0000 == 0x00050000  # the last instruction returns an errno
