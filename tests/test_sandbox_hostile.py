"""Every hostile program runs in a real sandbox; each must end in a clear violation or error and reach
nothing outside: the host process, a bystander sandbox, a folder of planted files (content and metadata),
a victim process, the fork server's limits and the next candidate's start stay as they were, and no
secret reaches the host's outcome (``tests.sandbox_support.Watch`` checks all of that after every run).

The programs from the first suite come first; then, per class, programs that switch the Python layers
off (as a program may: they are lint) and attack the kernel's directly."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from tests.sandbox_support import LIMITS, SECRET, WRITE, Victim, Watch, read


@pytest.fixture(autouse=True)
def planted_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)


@pytest.fixture(scope="module")
def victim():
    process = Victim()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def watch(tmp_path_factory: pytest.TempPathFactory, victim: Victim):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "planted.txt").write_text("planted content " + SECRET)
    (outside / "folder").mkdir()
    (outside / "folder" / "inner.txt").write_text("inner")
    shutil.copy(os.path.realpath(sys.executable), outside / "binary")
    (outside / "link").symlink_to("planted.txt")
    observer = Watch(outside, victim)
    yield observer
    observer.close()


def value(outcome) -> str:
    return outcome.value if isinstance(outcome.value, str) else ""


def escaped(outcome) -> bool:
    return "ESCAPED" in value(outcome) or "ESCAPED" in outcome.message


# --- the first suite's programs --------------------------------------------------------------------


def test_infinite_loop_in_write_is_killed_at_the_deadline(watch):
    load, write, again = watch.run("loop_in_write", [WRITE, read()])  # the watch sees the candidate's process gone
    assert load.ok
    assert write.kind == "timeout" and "killed" in write.message and f"within {LIMITS.call_timeout_s:g} s" in write.message
    assert write.violation
    assert again.kind == "timeout"  # the dead sandbox keeps answering with its cause


def test_busy_loop_in_read_is_killed_at_the_deadline(watch):
    _, _, outcome = watch.run("busy_read", [WRITE, read()])
    assert outcome.kind == "timeout" and "read()" in outcome.message


def test_constructor_that_never_returns_is_killed(watch):
    (load,) = watch.run("loop_in_init", [])
    assert load.kind == "timeout" and "load()" in load.message


def test_memory_bomb_hits_the_memory_limit(watch):
    limits = SandboxLimits(call_timeout_s=20.0, memory_mb=1024)
    _, write = watch.run("memory_bomb", [WRITE], limits)
    assert write.kind == "memory" and write.violation


def test_fork_bomb_is_refused(watch):
    _, write = watch.run("fork_bomb", [WRITE])
    # Caught by the program, the refusal is still reported by the hook the moment it happens.
    assert write.kind == "forbidden" and "os.fork" in write.message


def test_subprocess_spawn_is_refused_and_nothing_runs(watch):
    target = watch.outside / "pwned.txt"
    _, outcome = watch.run("subprocess_spawn", [read(str(target))])
    assert outcome.kind == "forbidden" and "subprocess.Popen" in outcome.message
    assert not target.exists()


def listener() -> tuple[socket.socket, list[object], threading.Thread]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    arrived: list[object] = []

    def accept() -> None:
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            try:
                arrived.append(server.accept())
            except (TimeoutError, OSError):
                continue

    watcher = threading.Thread(target=accept)
    watcher.start()
    return server, arrived, watcher


def test_socket_connect_to_a_listening_port_never_arrives(watch):
    server, arrived, watcher = listener()
    _, outcome = watch.run("socket_connect", [read(str(server.getsockname()[1]))])
    watcher.join()
    server.close()
    assert outcome.kind == "forbidden" and "socket" in outcome.message
    assert arrived == []


def test_environment_secrets_never_reach_the_program(watch):
    _, outcome = watch.run("env_secret", [read()])
    # Its own environment holds nothing, and not even its own /proc entry is readable: it is not dumpable.
    assert not outcome.ok and "environ" in outcome.message


def test_reading_a_file_outside_the_sandbox_is_refused(watch):
    _, outcome = watch.run("read_outside", [read(str(watch.outside / "planted.txt"))])
    assert outcome.kind == "forbidden" and "outside the sandbox folder" in outcome.message
    assert outcome.value is None


def test_writing_outside_the_sandbox_is_refused(watch):
    _, outcome = watch.run("write_outside", [read(str(watch.outside / "written"))])
    assert outcome.kind == "forbidden" and "outside the sandbox folder" in outcome.message


def test_printing_100_mb_cannot_break_the_protocol(watch):
    _, write, answer = watch.run("print_flood", [WRITE, read()])
    assert write.ok, write.describe()
    assert answer.ok and answer.value == "count=1"


def test_os_exit_in_write_is_a_crash_with_its_exit_code(watch):
    _, write = watch.run("exit_in_write", [WRITE])
    assert write.kind == "crashed" and "exited with code 0 during write()" in write.message


def test_two_llm_calls_in_one_read_break_the_budget(watch):
    _, outcome = watch.run("two_llm_calls", [read()])
    assert outcome.kind == "llm_budget" and "2 toolkit LLM calls" in outcome.message
    assert outcome.llm_calls == 2


def test_returning_10000_characters_is_a_violation(watch):
    _, outcome = watch.run("long_read", [read()])
    assert outcome.kind == "read_too_long" and "10,000" in outcome.message


def test_an_exception_is_reported_with_the_programs_traceback(watch):
    _, outcome, again = watch.run("raises", [read(), read()])
    assert outcome.kind == "exception" and not outcome.violation
    assert "ValueError: deliberate failure in read" in outcome.message
    assert "program.py" in outcome.traceback
    assert again.kind == "exception"  # an ordinary error does not kill the sandbox


def test_unbounded_recursion_is_reported(watch):
    _, write = watch.run("recursion", [WRITE])
    assert write.kind == "recursion" and "RecursionError" in write.message


def test_a_thread_left_running_is_a_violation(watch):
    _, write = watch.run("thread_left_running", [WRITE])
    assert write.violation
    assert write.kind in {"thread", "llm_budget", "protocol"}


def test_importing_ctypes_fails_to_load(watch):
    (load,) = watch.run("import_ctypes", [])
    assert not load.ok and "import of 'ctypes' is not allowed" in load.message


def test_ctypes_through_importlib_is_refused(watch):
    _, outcome = watch.run("importlib_trick", [read(str(watch.outside / "pwned"))])
    assert outcome.kind == "forbidden" and "ctypes" in outcome.message
    assert not (watch.outside / "pwned").exists()


# --- the Python layers are lint: with them switched off, the kernel's hold ------------------------


@pytest.mark.parametrize("action, target", [
    ("read", "planted.txt"), ("libc_open", "planted.txt"), ("read", "/etc/shadow"), ("read", "/root/.bashrc"),
    ("write", "new.txt"), ("write", "/usr/lib/pwned"), ("list", "."),
])
def test_with_the_python_layers_off_files_outside_stay_out_of_reach(watch, action, target):
    path = target if target.startswith("/") else str(watch.outside / target)
    _, outcome = watch.run("python_layers", [read(f"{action}|{path}")])
    assert not escaped(outcome), outcome.describe()
    assert "planted" not in value(outcome)
    assert not (watch.outside / "new.txt").exists() and not Path("/usr/lib/pwned").exists()


# --- root inside: attributes, modes, owners, times, flags, devices --------------------------------


@pytest.mark.parametrize("action", ["xattr_user", "xattr_capability", "chmod", "chown", "utime", "immutable", "mknod"])
@pytest.mark.parametrize("target", ["planted.txt", "binary", "self"])
def test_nothing_changes_a_files_attributes(watch, action, target):
    path = "self" if target == "self" else str(watch.outside / target)
    _, outcome = watch.run("privileged_files", [read(f"{action}|{path}")])
    assert not escaped(outcome), outcome.describe()


@pytest.mark.parametrize("call", ["mount", "umount2", "mount_setattr", "fsopen", "fspick", "open_tree", "move_mount",
                                  "pivot_root", "chroot"])
def test_the_mount_family_kills_the_process(watch, call):
    _, outcome = watch.run("mount_family", [read(call)])
    assert outcome.kind == "forbidden" and "SIGSYS" in outcome.message, outcome.describe()


@pytest.mark.parametrize("attempt", ["syslog", "kmsg", "proc_kmsg", "adjtimex", "clock_settime", "settimeofday"])
def test_no_kernel_log_and_no_clock_change(watch, attempt):
    _, outcome = watch.run("kernel_state", [read(attempt)])
    assert not escaped(outcome), outcome.describe()
    assert outcome.kind == "forbidden" or value(outcome).startswith(f"{attempt} blocked")


# --- other processes -------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["renice", "pin", "reschedule", "prlimit", "kill", "stop", "tgkill", "sigqueue",
                                    "ptrace", "vm_read", "pidfd", "environ"])
def test_a_process_outside_cannot_be_touched(watch, victim, action):
    _, outcome = watch.run("other_processes", [read(f"{action}|{victim.pid}")])
    assert not escaped(outcome), outcome.describe()


@pytest.mark.parametrize("action", ["prlimit", "renice", "pin", "kill", "environ"])
@pytest.mark.parametrize("whom", ["parent", "grandparent"])
def test_neither_keeper_nor_fork_server_can_be_reached(watch, action, whom):
    _, outcome = watch.run("other_processes", [read(f"{action}|{whom}")])
    assert not escaped(outcome), outcome.describe()


def test_only_its_own_pid_is_in_sight(watch):
    _, outcome = watch.run("other_processes", [read("scan")])
    assert outcome.ok and value(outcome) == "live pids: 1", outcome.describe()


@pytest.mark.parametrize("attempt", ["unshare_user", "unshare_mount", "setns", "clone_newuser", "clone_thread_newns"])
def test_no_namespace_of_its_own_and_none_of_anothers(watch, attempt):
    _, outcome = watch.run("namespace_escape", [read(attempt)])
    assert not escaped(outcome), outcome.describe()


@pytest.mark.parametrize("call", ["io_uring_setup", "userfaultfd", "perf_event_open", "bpf", "keyctl", "personality",
                                  "memfd_execveat", "kexec_load", "init_module", "open_by_handle_at", "iopl"])
def test_exotic_system_calls_are_refused(watch, call):
    _, outcome = watch.run("exotic_syscalls", [read(call)])
    assert not escaped(outcome), outcome.describe()


@pytest.mark.parametrize("family", ["inet", "inet6", "unix", "netlink", "packet", "vsock", "alg", "pair_inet"])
def test_no_socket_of_any_family(watch, family):
    _, outcome = watch.run("sockets", [read(family)])
    assert not escaped(outcome) and "blocked" in value(outcome), outcome.describe()


def test_no_connection_reaches_a_port_or_an_abstract_socket_of_the_host(watch):
    server, arrived, watcher = listener()
    name = f"mstar-test-{os.getpid()}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0" + name)
    abstract.listen(1)
    abstract.setblocking(False)
    _, tcp, unix = watch.run("sockets", [read(f"tcp|{server.getsockname()[1]}"), read(f"abstract|{name}")])
    watcher.join()
    server.close()
    with pytest.raises(BlockingIOError):
        abstract.accept()
    abstract.close()
    assert arrived == []
    assert not escaped(tcp) and not escaped(unix)


def test_it_inherits_no_descriptor_but_its_channel_and_its_database(watch):
    _, outcome = watch.run("fds_and_tty", [read("fds")])
    held = value(outcome).split()[1:]
    assert outcome.ok and len(held) == 2, outcome.describe()
    assert any("socket:" in fd for fd in held) and any(fd.endswith("/memory.sqlite3") for fd in held)


def test_no_input_pushed_into_a_terminal(watch):
    _, outcome = watch.run("fds_and_tty", [read("tiocsti")])
    assert not escaped(outcome), outcome.describe()


@pytest.mark.parametrize("place", ["shm", "tmp", "vartmp", "dev"])
def test_nothing_written_where_other_processes_look(watch, place):
    _, outcome = watch.run("shared_places", [read(place)])
    assert not escaped(outcome), outcome.describe()
    assert not Path("/dev/shm/mstar-pwned").exists() and not Path("/tmp/mstar-pwned").exists()


def test_links_to_outside_leave_the_outside_untouched(watch):
    _, outcome = watch.run("shared_places", [read(f"links|{watch.outside / 'planted.txt'}")])
    assert not escaped(outcome), outcome.describe()


@pytest.mark.parametrize("what", ["bytes", "inodes"])
def test_filling_the_folder_is_a_violation_and_the_next_candidate_starts_empty(watch, what):
    limits = SandboxLimits(call_timeout_s=30.0, disk_mb=64, disk_inodes=2000)
    _, outcome = watch.run("disk_flood", [read(what)], limits)  # the watch starts the next candidate and checks it
    assert outcome.kind == "disk" and outcome.violation, outcome.describe()  # the limit, not the 30 s deadline
