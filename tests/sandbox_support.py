"""What the sandbox suites share: the planted secret, recording stand-ins for the host's LLM and embedder,
a victim process outside every sandbox, and ``Watch``, which runs a hostile program and then checks that
nothing outside its sandbox moved: the host process, a bystander sandbox, a folder of planted files
(content and metadata), the victim, the fork server's limits, and the next candidate's start."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mstar_ray.sandbox_host.fork_server import ForkServer

from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits

from mstar_ray.sandbox_host.outcome import Outcome

from mstar_ray.sandbox_host.process import Sandbox
from tests.conftest import HOSTILE, seed_source

SECRET = "sk-test-mstar-planted-secret-0123456789"
LIMITS = SandboxLimits(call_timeout_s=5.0)
FS_IOC_GETFLAGS = 0x80086601
WRITE = ("write", {"item": {"text": "t"}, "raw_text": "t"})

CANARY = '''
import random
from dataclasses import dataclass
INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""
@dataclass
class KnowledgeItem:
    text: str
@dataclass
class Query:
    text: str
class KnowledgeBase:
    def __init__(self, toolkit):
        self.db = toolkit.db
        self.db.execute("CREATE TABLE t (x)")
    def write(self, item, raw_text):
        self.db.execute("INSERT INTO t VALUES (?)", (raw_text * 1000,))
        self.db.commit()
    def read(self, query):
        os = random._os
        fd = os.open("/proc/self/limits", os.O_RDONLY)
        limits = os.read(fd, 10000).decode()
        os.close(fd)
        size = [line for line in limits.splitlines() if line.startswith("Max file size")][0].split()[3]
        return " ".join(sorted(os.listdir("."))) + " | " + size
'''


def hostile_source(name: str) -> str:
    """A hostile program as a candidate would send it: one file, the attack kit in place of its marker."""
    kit = (HOSTILE / "_attack_kit.py").read_text().split('"""', 2)[2].lstrip("\n")
    return (HOSTILE / f"{name}.py").read_text().replace("# ATTACK KIT\n", kit)


def read(text: str = "q") -> tuple[str, dict]:
    return ("read", {"query": {"text": text}})


class FakeLLM:
    """The host's toolkit LLM: records every request it is asked to send."""

    def __init__(self, delay_s: float = 0.0):
        self.requests: list[Any] = []
        self.answered = 0  # requests whose answer was ready (after ``delay_s``)
        self.delay_s = delay_s

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.requests.append(messages)
        time.sleep(self.delay_s)
        self.answered += 1
        return "an answer"


class FakeEmbed:
    def __init__(self, delay_s: float = 0.0):
        self.texts = 0
        self.delay_s = delay_s

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        time.sleep(self.delay_s)
        return [[float(len(t) % 7), 1.0, 0.5] for t in texts]


def file_state(path: Path) -> tuple:
    """Everything a program might change about a file or folder: content, mode, owner, times, extended
    attributes and inode flags (immutable, append-only)."""
    st = os.lstat(path)
    xattrs = {name: os.getxattr(path, name, follow_symlinks=False) for name in os.listxattr(path, follow_symlinks=False)}
    flags = None
    if not path.is_symlink():
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            flags = fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 8)
        except OSError:
            pass
        finally:
            os.close(fd)
    content = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return (content, st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_ctime_ns, xattrs, flags)


def snapshot(folder: Path) -> dict[str, tuple]:
    return {str(p.relative_to(folder)): file_state(p) for p in [folder, *sorted(folder.rglob("*"))]}


def process_state(pid: int) -> tuple:
    """What another process could change about ``pid``: limits, priority, CPUs, policy, being stopped."""
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return (pid, Path(f"/proc/{pid}/limits").read_text(), fields[16], fields[0] in "Tt", os.sched_getaffinity(pid),
            os.sched_getscheduler(pid))


@dataclass
class Victim:
    """A process outside every sandbox, with a secret in its environment."""

    process: subprocess.Popen = field(default_factory=lambda: subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"], env={"VICTIM_SECRET": SECRET},
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    @property
    def pid(self) -> int:
        return self.process.pid

    def state(self) -> tuple:
        code = self.process.poll()
        return (code, process_state(self.pid) if code is None else None)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


class Watch:
    """Runs hostile programs beside one bystander sandbox and checks the world after each."""

    def __init__(self, outside: Path, victim: Victim, fork_server: ForkServer | None = None):
        self.outside = outside
        self.victim = victim
        self.fork_server = fork_server
        self.bystander = Sandbox(seed_source("experience_learner"), limits=LIMITS, fork_server=fork_server)
        assert self.bystander.start().ok
        assert self.bystander.write({"lesson": "l", "fact": "Alice lives in Lisbon"}, "raw").ok

    def close(self) -> None:
        self.bystander.close()

    def server(self, source: str) -> ForkServer:
        """The fork server that forks ``source``'s sandbox."""
        from mstar_ray.sandbox_host.fork_server import shared_fork_server

        return self.fork_server or shared_fork_server(chroma=False)

    def run(self, name: str, calls: list[tuple[str, dict]], limits: SandboxLimits = LIMITS,
            llm: FakeLLM | None = None, embed: FakeEmbed | None = None, source: str | None = None) -> list[Outcome]:
        source = source if source is not None else hostile_source(name)
        before = (snapshot(self.outside), process_state(os.getpid()), self.victim.state(),
                  process_state(self.server(source).zygote.pid))
        outcomes = []
        with Sandbox(source, limits=limits, llm=llm or FakeLLM(), embed=embed or FakeEmbed(),
                     fork_server=self.fork_server) as sandbox:
            outcomes.append(sandbox.start())
            for op, args in calls:
                outcomes.append(getattr(sandbox, op)(**args))
            assert sandbox.layers, "the sandbox reported no isolation layers"
            candidate = sandbox.host_pid
        assert candidate is not None and not os.path.exists(f"/proc/{candidate}"), "the candidate outlived close()"
        after = (snapshot(self.outside), process_state(os.getpid()), self.victim.state(),
                 process_state(self.server(source).zygote.pid))
        for what, old, new in zip(("the outside folder", "the host process", "the victim process", "the fork server"),
                                  before, after):
            assert old == new, f"a hostile program changed {what}"
        for outcome in outcomes:
            assert SECRET not in outcome.model_dump_json(), "a secret reached the host's outcome"
        check = self.bystander.read({"topic": "Alice"})
        assert check.ok and "Lisbon" in check.value, f"the bystander broke: {check.describe()}"
        self.next_candidate_starts_clean(limits)
        return outcomes

    def next_candidate_starts_clean(self, limits: SandboxLimits) -> None:
        with Sandbox(CANARY, limits=limits, fork_server=self.fork_server) as canary:
            assert canary.start().ok
            assert canary.write({"text": "x"}, "x").ok
            listing = canary.read({"text": "q"})
        assert listing.ok, listing.describe()
        files, size = listing.value.split(" | ")
        assert files == "memory.sqlite3", f"the next candidate found {files!r} in its folder"
        assert int(size) == limits.file_size_mb * 2**20, "the next candidate started with another file-size limit"
