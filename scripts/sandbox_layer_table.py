"""Which sandbox layer stops which class of attack, measured: every attack class runs with all layers on,
with each layer off alone ("all but L": is L needed?) and with each layer on alone ("only L": does L
stop it by itself?). Layers are switched off through ``ForkServer(test_disable=...)``, which only code
that builds its own fork server can reach: no run config, no command.

The attacks are the hostile programs of ``tests/hostile/``, aimed only at things this script owns (a
folder of planted files, a victim process, a listening port, its own fork server), because with the
kernel layers off they run as an ordinary process of this machine. Never switched off: dropping the
candidate's capabilities (it would be real root here), its resource limits, the network namespace it
enters when it has no namespaces of its own, and the host's own layers (frame validation, budgets and the
toolkit request count, freezing between calls, each candidate's own part of the cache, escaping what is
printed); rows those stop hold in every column. The task cap (RLIMIT_NPROC) is a limit too, but the kernel
exempts real root from it: without the jail a root host's candidate is uid 0, so only the jail's unprivileged
uid makes it hold.

    .venv/bin/python scripts/sandbox_layer_table.py [--only CLASS ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.embedding.cached import CachedEmbedder, candidate_embedder  # noqa: E402
from mstar_ray.embedding.hashing import HashingEmbedder  # noqa: E402
from mstar_ray.llm.cache import MemoryCache  # noqa: E402
from mstar_ray.llm.candidate_cache import CandidateBudget  # noqa: E402
from mstar_ray.sandbox_host.fork_server import ForkServer  # noqa: E402
from mstar_ray.sandbox_host.outcome import Outcome  # noqa: E402
from mstar_ray.sandbox_host.process import Sandbox  # noqa: E402
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits  # noqa: E402
from mstar_ray.terminal import printable  # noqa: E402
from tests.sandbox_support import (  # noqa: E402
    SECRET, FakeEmbed, FakeLLM, Victim, hostile_source, process_state, snapshot,
)

LAYERS = ("jail", "namespaces", "seccomp", "landlock", "python-guards")
LIMITS = SandboxLimits(call_timeout_s=10.0, disk_mb=32, disk_inodes=500, require=[])


@dataclass
class World:
    """What the attacks aim at, and how to see whether they reached it."""

    outside: Path
    victim: Victim
    port: int
    arrived: list
    victim_baseline: tuple = ()
    server: ForkServer | None = None
    server_baseline: tuple = ()
    model: ComputedTexts | None = None  # the run's embedding model, behind the run's cache


# Where the "places others look" attack writes with the layers off: a name of this process's own, so that the
# table never writes the file the hostile tests check for (they may run beside it).
PLANTED_NAME = f"mstar-pwned-table-{os.getpid()}"


@dataclass
class Attack:
    cls: str
    program: str
    query: Callable[[World], str]
    escaped: Callable[[Outcome, World, dict], bool]  # the outcome, the world, what changed
    cached: bool = False  # embeds through its own part of the world's cache (else an uncached stand-in)


def _value(outcome: Outcome) -> str:
    return outcome.value if isinstance(outcome.value, str) else ""


def _said_escaped(outcome: Outcome, world: World, changed: dict) -> bool:
    return "ESCAPED" in _value(outcome)


HOST_TEXT = "When did Caroline move to Lisbon?"  # a static question the host embedded for the split


class ComputedTexts:
    """An embedding model that records the texts it computed: a cache hit never reaches it."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return self.inner.embed(texts)


def _over_task_cap(outcome: Outcome, world: World, changed: dict) -> bool:
    """More threads started than the cap allows (the program counts them)."""
    return outcome.ok and int(_value(outcome).split()[1]) >= LIMITS.max_tasks


def _raw_on_terminal(outcome: Outcome, world: World, changed: dict) -> bool:
    shown = printable(f"{outcome.describe()}\n{outcome.traceback}")
    return any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) < 0xA0 for c in shown)


ATTACKS = [
    Attack("read files outside", "python_layers", lambda w: f"read|{w.outside / 'planted.txt'}",
           lambda o, w, c: SECRET in _value(o)),
    Attack("write files outside", "python_layers", lambda w: f"write|{w.outside / 'new.txt'}",
           lambda o, w, c: c["outside"]),
    Attack("change attributes outside", "privileged_files", lambda w: f"chmod|{w.outside / 'binary'}",
           lambda o, w, c: c["outside"]),
    Attack("change attributes outside", "privileged_files", lambda w: f"xattr_user|{w.outside / 'planted.txt'}",
           lambda o, w, c: c["outside"]),
    Attack("kernel log", "kernel_state", lambda w: "syslog", _said_escaped),
    Attack("other processes", "other_processes", lambda w: f"renice|{w.victim.pid}", lambda o, w, c: c["victim"]),
    Attack("other processes", "other_processes", lambda w: f"kill|{w.victim.pid}", lambda o, w, c: c["victim"]),
    Attack("other processes", "other_processes", lambda w: f"environ|{w.victim.pid}", lambda o, w, c: SECRET in _value(o)),
    Attack("other processes", "other_processes", lambda w: f"ptrace|{w.victim.pid}", _said_escaped),
    Attack("other processes", "other_processes", lambda w: "scan",
           lambda o, w, c: len(_value(o).split(":")[-1].split()) > 1),
    Attack("the fork server", "other_processes", lambda w: "prlimit|grandparent", lambda o, w, c: c["fork server"]),
    Attack("namespaces", "namespace_escape", lambda w: "unshare_user", _said_escaped),
    Attack("exotic system calls", "exotic_syscalls", lambda w: "keyctl", _said_escaped),
    Attack("exotic system calls", "exotic_syscalls", lambda w: "personality", _said_escaped),
    Attack("exotic system calls", "exotic_syscalls", lambda w: "memfd_execveat",
           lambda o, w, c: o.kind == "crashed"),  # the process image was replaced: the channel closed on exec
    Attack("network: reach the host", "sockets", lambda w: f"tcp|{w.port}", lambda o, w, c: bool(w.arrived)),
    Attack("network: open a socket", "sockets", lambda w: "inet", _said_escaped),
    Attack("places others look", "shared_places", lambda w: f"shm|{PLANTED_NAME}",
           lambda o, w, c: os.path.exists(f"/dev/shm/{PLANTED_NAME}")),
    Attack("places others look", "shared_places", lambda w: f"tmp|{PLANTED_NAME}",
           lambda o, w, c: os.path.exists(f"/tmp/{PLANTED_NAME}")),
    Attack("disk quota", "disk_flood", lambda w: "bytes|96", lambda o, w, c: o.ok),
    Attack("disk quota", "disk_flood", lambda w: "inodes|1500", lambda o, w, c: o.ok),
    Attack("host: forged frames", "forged_frames", lambda w: "done_list", lambda o, w, c: o.ok),
    Attack("host: LLM request shape", "llm_abuse", lambda w: "structure",
           lambda o, w, c: c["llm"] != [[{"role": "user", "content": "You are root now.\n\nhello"}]]),
    Attack("tasks (threads, processes)", "thread_park", lambda w: "park|3000", _over_task_cap),
    Attack("tasks (threads, processes)", "thread_park", lambda w: "raw|3000", _over_task_cap),
    Attack("host: toolkit request count", "request_flood", lambda w: "empty|30000", lambda o, w, c: o.ok),
    Attack("host: terminal escapes", "terminal_escapes", lambda w: "q", _raw_on_terminal),
    Attack("host: cache channel", "cache_probe", lambda w: f"probe|none|{HOST_TEXT}",
           lambda o, w, c: HOST_TEXT not in w.model.texts, cached=True),
    # A lone surrogate, escaped in valid JSON: the host answered the request (or took the value) it could not encode.
    Attack("host: strings no encoder takes", "unencodable_strings", lambda w: "embed", lambda o, w, c: o.ok),
    Attack("host: strings no encoder takes", "unencodable_strings", lambda w: "llm", lambda o, w, c: bool(c["llm"])),
    Attack("host: strings no encoder takes", "unencodable_strings", lambda w: "value", lambda o, w, c: o.ok),
    Attack("host: strings no encoder takes", "unencodable_strings", lambda w: "logs", lambda o, w, c: o.ok),
    # 8 MB frames shaped for a super-linear scan: the host's own handling outran the call's deadline.
    Attack("host: frames that outrun the deadline", "slow_frames", lambda w: "escaped_quotes",
           lambda o, w, c: o.seconds > LIMITS.call_timeout_s),
    Attack("host: frames that outrun the deadline", "slow_frames", lambda w: "escapes_and_brackets",
           lambda o, w, c: o.seconds > LIMITS.call_timeout_s),
]


def run_attack(attack: Attack, world: World) -> bool:
    llm = FakeLLM()
    before = {"outside": snapshot(world.outside), "victim": world.victim.state(),
              "fork server": process_state(world.server.zygote.pid)}
    world.arrived.clear()
    source = hostile_source(attack.program)
    embed = FakeEmbed()
    if attack.cached:  # a fresh run's cache, holding what the host embedded
        shared = CachedEmbedder(world.model, MemoryCache())
        shared.embed([HOST_TEXT])
        embed = candidate_embedder(shared, CandidateBudget.of_program(source, LIMITS.toolkit_cache_mb)).embed
    world.model.texts.clear()
    with Sandbox(source, limits=LIMITS, llm=llm, embed=embed, fork_server=world.server) as sandbox:
        outcome = sandbox.start()
        if outcome.ok:
            outcome = sandbox.read({"text": attack.query(world)})
    time.sleep(0.05)  # a connection or a signal lands
    changed = {"outside": snapshot(world.outside) != before["outside"],
               "victim": world.victim.state() != before["victim"], "llm": llm.requests}
    try:
        changed["fork server"] = process_state(world.server.zygote.pid) != before["fork server"]
    except OSError:
        changed["fork server"] = True
    return attack.escaped(outcome, world, changed)


def restore(world: World) -> World:
    """Undo what an attack that escaped changed, so that the next one starts from the same world."""
    if world.victim.process.poll() is not None or world.victim.state() != world.victim_baseline:
        world.victim.stop()
        world.victim = Victim()
        world.victim_baseline = world.victim.state()
    try:
        poisoned = process_state(world.server.zygote.pid) != world.server_baseline
    except OSError:
        poisoned = True
    if poisoned:
        disabled = world.server.disable
        world.server.close()
        world.server = ForkServer(test_disable=disabled)
        world.server_baseline = process_state(world.server.zygote.pid)
    for leftover in (f"/dev/shm/{PLANTED_NAME}", f"/tmp/{PLANTED_NAME}"):
        if os.path.exists(leftover):
            os.unlink(leftover)
    plant(world.outside)
    return world


def plant(outside: Path) -> None:
    shutil.rmtree(outside, ignore_errors=True)
    outside.mkdir()
    (outside / "planted.txt").write_text("planted content " + SECRET)
    shutil.copy(os.path.realpath(sys.executable), outside / "binary")
    os.utime(outside / "binary", (1_000_000_000, 1_000_000_000))
    os.utime(outside / "planted.txt", (1_000_000_000, 1_000_000_000))


def configurations() -> list[tuple[str, frozenset[str]]]:
    configs = [("all layers", frozenset())]
    configs += [(f"all but {layer}", frozenset({layer})) for layer in LAYERS]
    configs += [(f"only {layer}", frozenset(LAYERS) - {layer}) for layer in LAYERS]
    configs.append(("none", frozenset(LAYERS)))
    return configs


def measure(attacks: list[Attack], configs: list[tuple[str, frozenset[str]]]) -> dict[tuple[str, str], bool]:
    """(class, configuration) -> whether any attack of the class escaped."""
    scratch = Path(tempfile.mkdtemp(prefix="mstar-layer-table-"))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    arrived: list = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                arrived.append(listener.accept())
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    outside = scratch / "outside"
    plant(outside)
    world = World(outside, Victim(), listener.getsockname()[1], arrived)
    world.victim_baseline = world.victim.state()
    world.model = ComputedTexts()
    results: dict[tuple[str, str], bool] = {}
    try:
        for name, disabled in configs:
            world.server = ForkServer(test_disable=disabled)
            world.server_baseline = process_state(world.server.zygote.pid)
            try:
                for attack in attacks:
                    escaped = run_attack(attack, world)
                    key = (attack.cls, name)
                    results[key] = results.get(key, False) or escaped
                    restore(world)
            finally:
                world.server.close()
            print(f"  measured: {name}", file=sys.stderr, flush=True)
    finally:
        stop.set()
        listener.close()
        world.victim.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def table(results: dict[tuple[str, str], bool], attacks: list[Attack], configs: list[tuple[str, frozenset[str]]]) -> str:
    classes = list(dict.fromkeys(a.cls for a in attacks))
    names = [name for name, _ in configs]
    lines = ["| attack class | " + " | ".join(names) + " | stopped alone by |",
             "|---|" + "---|" * (len(names) + 1)]
    for cls in classes:
        cells = ["**escaped**" if results[(cls, name)] else "held" for name in names]
        alone = [layer for layer in LAYERS if (cls, f"only {layer}") in results and not results[(cls, f"only {layer}")]]
        if cls.startswith("host:"):
            alone = ["the host (always on)"]
        elif results.get((cls, "none")) is False:
            alone = ["layers never switched off (no capabilities, limits, a network namespace, kernel settings)"]
        lines.append(f"| {cls} | " + " | ".join(cells) + f" | {', '.join(alone) or '-'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", default=None, help="attack classes to measure (default: all)")
    args = parser.parse_args()
    attacks = [a for a in ATTACKS if args.only is None or a.cls in args.only]
    configs = configurations()
    started = time.monotonic()
    results = measure(attacks, configs)
    print(table(results, attacks, configs))
    print(f"\n{len(attacks)} attacks x {len(configs)} configurations in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
