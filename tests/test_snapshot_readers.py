"""Reads from a snapshot (issue 42): after the writes, each read runs in a reader the program's process forks
from its post-write state, on a channel of its own, under the call's limits; at most ``readers`` at once. A
reader's violation is the program's, a process with threads keeps serial reads, Chroma's collections are read
as the writes left them (each reader's changes its own), and a program that forks on its own stays bounded by
its task cap, its pid namespace and the host's check."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.results import EvalConcurrency
from mstar_ray.sandbox_host.fork_server import ForkServer, shared_fork_server
from mstar_ray.sandbox_host.process import Sandbox
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from mstar_ray.tasks.model import Item, RawText, Task
from tests.conftest import seed_source

LIMITS = SandboxLimits(call_timeout_s=20.0, max_tasks=32)
EMBED = HashingEmbedder().embed
HEAD = '''
import dataclasses
from dataclasses import dataclass
import random
INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text."
INSTRUCTION_QUERY = "Copy the question."
INSTRUCTION_RESPONSE = "Answer."
ALWAYS_ON_KNOWLEDGE = ""
@dataclass
class KnowledgeItem:
    text: str
@dataclass
class Query:
    text: str
'''
# read() changes the state: under serial reads each answer would list the questions asked before it.
MUTATING = HEAD + '''
class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.notes = []
    def write(self, item, raw_text):
        self.notes.append(raw_text)
    def read(self, query):
        self.notes.append("asked " + query.text)
        if query.text.startswith("llm"):
            return self.toolkit.llm_completion(query.text)
        if query.text == "forbidden":
            random._os.open("/etc/passwd", 0)
        if query.text == "spin":
            while True:
                pass
        if query.text == "die":
            random._os._exit(3)
        if query.text == "thread":
            threads = dataclasses.sys.modules["threading"]  # past the import whitelist, as an attacker would
            threads.Thread(target=dataclasses.sys.modules["time"].sleep, args=(600,), daemon=True).start()
        return " | ".join(self.notes)
'''


# read() says how many modules of the package it names are loaded in its process.
LOADED = HEAD + '''
class KnowledgeBase:
    def __init__(self, toolkit):
        self.modules = dataclasses.sys.modules
    def write(self, item, raw_text):
        return None
    def read(self, query):
        return str(sum(name.split(".")[0] == query.text for name in self.modules))
'''


def test_no_programs_process_loads_chroma():
    """A process with Chroma's bindings loaded takes about 8x as long to fork a reader, and its runtime's threads
    would not survive the fork: every program's process starts from a fork server without them, whether its
    source names Chroma or not (its collections live in a Chroma process of their own)."""
    for source in (LOADED, LOADED + "# keeps its vectors in chromadb\n"):
        with Sandbox(source, limits=LIMITS) as sandbox:
            assert sandbox.start().ok
            loaded = {package: sandbox.read({"text": package}) for package in ("chromadb", "numpy")}
            assert all(outcome.ok for outcome in loaded.values())
            assert int(loaded["chromadb"].value) == 0
            assert int(loaded["numpy"].value) > 0  # preloaded


def _read_all(sandbox: Sandbox, questions: list[str]) -> dict[str, str]:
    answers = {}
    for question in questions:
        outcome = sandbox.read({"text": question})
        assert outcome.ok, outcome.describe()
        answers[question] = outcome.value
    return answers


def _written(source: str, readers: int = 3, **kwargs) -> Sandbox:
    sandbox = Sandbox(source, limits=kwargs.pop("limits", LIMITS), readers=readers, **kwargs)
    assert sandbox.start().ok
    for text in ("Alice moved to Paris.", "Bob stayed in Rome."):
        assert sandbox.write({"text": text}, text).ok
    return sandbox


def _in_both_orders(source: str, questions: list[str], **kwargs) -> dict[str, str]:
    """Each question read from the snapshot, in order and then reversed, each in a reader of its own: the
    answers, which must not depend on the order."""
    with _written(source, **kwargs) as sandbox:
        assert sandbox.snapshot() is None and sandbox.reads_forked
        forward = _read_all(sandbox, questions)
        backward = _read_all(sandbox, list(reversed(questions)))
        assert sandbox.readers_forked == 2 * len(questions)
    assert forward == backward
    return forward


def test_every_read_sees_the_post_write_state_whatever_the_order():
    questions = ["where", "when", "who"]
    forward = _in_both_orders(MUTATING, questions)
    assert forward["who"] == "Alice moved to Paris. | Bob stayed in Rome. | asked who"
    with _written(MUTATING, readers=1) as serial:  # the old rule, still there with one reader
        assert serial.snapshot() is not None and not serial.reads_forked
        assert _read_all(serial, questions)["who"].endswith("asked where | asked when | asked who")


SQL_MUTATING = HEAD + '''
import sqlite3
class KnowledgeBase:
    def __init__(self, toolkit):
        self.db = toolkit.db
        self.own = sqlite3.connect("own.sqlite3")
        for db in (self.db, self.own):
            db.execute("CREATE TABLE notes (text TEXT)")
    def write(self, item, raw_text):
        for db in (self.db, self.own):
            db.execute("INSERT INTO notes VALUES (?)", (raw_text,))
            db.commit()
    def read(self, query):
        answers = []
        for db in (self.db, self.own):
            db.execute("INSERT INTO notes VALUES (?)", ("asked " + query.text,))
            db.commit()
            answers.append(" | ".join(row[0] for row in db.execute("SELECT text FROM notes")))
        return " || ".join(answers)
'''


def test_what_a_reader_writes_to_its_databases_stays_in_that_reader():
    questions = ["where", "when", "who"]
    with _written(SQL_MUTATING) as sandbox:
        sandbox.snapshot()
        forward = _read_all(sandbox, questions)
        backward = _read_all(sandbox, list(reversed(questions)))
    assert forward == backward
    assert forward["who"] == " || ".join(["Alice moved to Paris. | Bob stayed in Rome. | asked who"] * 2)


def test_at_most_readers_run_at_once_counted_at_the_host():
    readers, reads = 3, 8
    lock, everyone_in = threading.Lock(), threading.Event()
    state = {"active": 0, "peak": 0}

    def llm(messages):
        with lock:
            state["active"] += 1
            state["peak"] = max(state["peak"], state["active"])
            if state["active"] == readers:
                everyone_in.set()
        everyone_in.wait(60)  # held until the limit is reached: the count, not the timing, is asserted
        with lock:
            state["active"] -= 1
        return "answer to " + messages[0]["content"]

    with _written(MUTATING, readers=readers, llm=llm) as sandbox:
        sandbox.snapshot()
        outcomes: list = [None] * reads
        threads = [threading.Thread(target=lambda i=i: outcomes.__setitem__(i, sandbox.read({"text": f"llm{i}"})))
                   for i in range(reads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [o.value for o in outcomes] == [f"answer to llm{i}" for i in range(reads)], [o.describe() for o in outcomes]
        assert state["peak"] == readers and sandbox.readers_peak == readers
        assert 1 <= sandbox.children_peak <= readers  # the kernel's count of the program's children
        assert sandbox.readers_forked == reads and sandbox.rss_peak_kb > 0


@pytest.mark.parametrize("question, kind", [("forbidden", "forbidden"), ("die", "crashed"), ("spin", "timeout"),
                                            ("thread", "thread")])
def test_a_readers_violation_is_the_programs(question, kind):
    limits = SandboxLimits(call_timeout_s=3.0, max_tasks=32)
    with _written(MUTATING, limits=limits) as sandbox:
        sandbox.snapshot()
        outcome = sandbox.read({"text": question})
        assert outcome.violation and outcome.kind == kind, outcome.describe()
        assert sandbox.read({"text": "who"}).ok  # the host and the program's process are unharmed


def test_a_process_running_threads_keeps_serial_reads(unguarded):
    # faulthandler's watchdog is a native thread, which Python's own count of its threads does not see: the
    # thread count the host reads at the snapshot still tells, and reads stay in the process, in order.
    threaded = HEAD + '''
import faulthandler
class KnowledgeBase:
    def __init__(self, toolkit):
        self.n = 0
    def write(self, item, raw_text):
        self.n += 1
        faulthandler.dump_traceback_later(600)
    def read(self, query):
        self.n += 1
        return str(self.n)
'''
    with _written(threaded, fork_server=unguarded) as sandbox:
        assert sandbox.fork_readers
        assert "threads" in (sandbox.snapshot() or "") and not sandbox.reads_forked
        assert [sandbox.read({"text": "q"}).value for _ in range(2)] == ["3", "4"]


# read() changes its collections, then says what it sees: under serial reads each answer would count the
# documents earlier reads added, and a read that deleted the collection would leave the next nothing to read.
CHROMA_MUTATING = HEAD + '''
class KnowledgeBase:
    def __init__(self, toolkit):
        self.chroma = getattr(toolkit, "chr" + "oma")  # a name no static check sees: any name reaches it
        self.notes = self.chroma.get_or_create_collection("notes", metadata={"hnsw:space": "cosine"})
        self.n = 0
    def write(self, item, raw_text):
        self.n += 1
        self.notes.add(ids=["w" + str(self.n)], documents=[raw_text])
    def read(self, query):
        if query.text == "drop":
            self.chroma.delete_collection("notes")
            return "dropped " + str(len(self.chroma.list_collections()))
        if query.text == "scratch":
            try:
                self.chroma.create_collection("x")  # a name Chroma refuses: it leaves nothing behind
            except ValueError:
                pass
            self.chroma.create_collection("scratch").add(ids=["s"], embeddings=[[0.5] * 8])
        self.n += 1
        self.notes.add(ids=["r" + str(self.n)], documents=["asked " + query.text])
        found = self.notes.query(query_texts=[query.text], n_results=2)["ids"][0]
        names = sorted(c.name for c in self.chroma.list_collections())
        seen = sorted(self.notes.get()["ids"])
        return "%d %s %s %s" % (self.notes.count(), ",".join(names), ",".join(seen), found[0])
'''


def test_every_read_sees_the_post_write_collections_whatever_the_order():
    questions = ["where", "scratch", "who", "drop"]
    forward = _in_both_orders(CHROMA_MUTATING, questions, embed=EMBED)
    assert forward["drop"] == "dropped 0"
    # the two written and its own, no other read's; its own is the nearest to its question
    assert forward["where"] == forward["who"] == "3 notes r3,w1,w2 r3"
    assert forward["scratch"] == "3 notes,scratch r3,w1,w2 r3"  # what it created, seen by itself only
    with _written(CHROMA_MUTATING, readers=1, embed=EMBED) as sandbox:
        assert "one reader" in (sandbox.snapshot() or "")
        serial = _read_all(sandbox, questions)
    assert serial["who"] == "5 notes,scratch r3,r4,r5,w1,w2 r5"  # each read saw the ones before
    assert serial["drop"] == "dropped 1"


COPIED_BY_EACH_READ = HEAD + '''
class KnowledgeBase:
    def __init__(self, toolkit):
        self.notes = toolkit.chroma.create_collection("notes")
    def write(self, item, raw_text):
        self.notes.add(ids=["a", "b"], embeddings=[[1.0, 0.0], [0.0, 1.0]])
    def read(self, query):
        self.notes.add(ids=["r"], embeddings=[[1.0, 1.0]])
        return ",".join(sorted(self.notes.get(include=["embeddings"])["ids"]))
'''


def test_readers_copies_come_and_go_and_the_written_vectors_stay():
    """Chroma sized its pool of vector indexes from the descriptor limit (a fifth), as if each held files. Under
    the sandbox's 256, the copies readers make and drop pushed the written collection's index out of that pool,
    and it came back empty: reads failed with "Error finding id" (on the store alone, with that limit, 15 of
    16 runs of copies made and dropped failed within 150)."""
    with Sandbox(COPIED_BY_EACH_READ, limits=LIMITS, readers=2) as sandbox:
        assert sandbox.start().ok and sandbox.write({"text": "t"}, "t").ok
        assert sandbox.snapshot() is None
        answers = [sandbox.read({"text": str(n)}) for n in range(300)]
    assert {outcome.value for outcome in answers} == {"a,b,r"}, next(o.describe() for o in answers if not o.ok)


def test_the_chroma_process_has_the_programs_layers_and_dies_with_its_sandbox():
    with _written(CHROMA_MUTATING, embed=EMBED) as sandbox:
        store = sandbox._store
        assert store is not None and store.host_pid != sandbox.host_pid
        assert "chroma-process" in store.layers and "seccomp" in " ".join(store.layers)
        assert not set(store.missing_layers) & set(LIMITS.require)
        assert {"namespaces", "seccomp", "capabilities"}.isdisjoint(store.missing_layers)
        pid = store.host_pid
    assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read()


def test_a_program_that_reaches_chroma_by_another_name_gets_its_chroma_process_on_first_use():
    hidden = HEAD + '''
class KnowledgeBase:
    def __init__(self, toolkit):
        self.vectors = getattr(toolkit, "chr" + "oma")
    def write(self, item, raw_text):
        self.vectors.get_or_create_collection("notes").add(ids=[raw_text], documents=[raw_text])
    def read(self, query):
        return str(self.vectors.get_collection("notes").count())
'''
    sandbox = Sandbox(hidden, limits=LIMITS, readers=3, embed=EMBED)
    with sandbox:
        assert sandbox.start().ok and sandbox._store is None  # no word of it in the source: not started yet
        assert sandbox.write({"text": "a"}, "a").ok and sandbox._store is not None
        assert sandbox.snapshot() is None and sandbox.read({"text": "q"}).value == "1"


def test_a_chroma_process_that_dies_is_the_programs_violation_and_nothing_else():
    with _written(CHROMA_MUTATING, embed=EMBED) as sandbox:
        assert sandbox.snapshot() is None
        os.kill(sandbox._store.host_pid, 9)
        outcome = sandbox.read({"text": "where"})
        assert outcome.violation and outcome.kind == "crashed", outcome.describe()
        assert "Chroma process" in outcome.message
    with _written(CHROMA_MUTATING, embed=EMBED) as sandbox:  # the next program's Chroma is its own, and whole
        assert sandbox.read({"text": "where"}).value == "3 notes r3,w1,w2 r3"


def test_a_chroma_process_that_hangs_costs_the_caller_its_deadline_and_no_more():
    limits = SandboxLimits(call_timeout_s=5.0, max_tasks=32)
    with _written(CHROMA_MUTATING, embed=EMBED, limits=limits) as sandbox:
        assert sandbox.snapshot() is None
        os.kill(sandbox._store.host_pid, signal.SIGSTOP)  # answers nothing from now on
        outcome = sandbox.read({"text": "where"})
        assert outcome.violation and outcome.kind == "timeout", outcome.describe()
        assert sandbox._store.exit_status is not None  # killed, not left hanging
        assert sandbox.read({"text": "who"}).violation  # and nothing after it is served


# A program that writes nothing and reads by speaking to the host itself, as a hostile one would.
TOOLKIT_ONLY = HEAD + '''
class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
    def write(self, item, raw_text):
        pass
'''


def test_a_programs_process_that_sends_the_chroma_processs_answer_breaks_the_protocol():
    forging = TOOLKIT_ONLY + '''
    def read(self, query):
        return str(self.toolkit._ask({"op": "stored", "payload": "{}"}))
'''
    with _written(forging) as sandbox:
        outcome = sandbox.read({"text": "q"})
    assert outcome.violation and outcome.kind == "protocol" and "'stored'" in outcome.message, outcome.describe()


def test_a_chroma_call_the_store_does_not_offer_is_the_programs_error_to_catch():
    probing = TOOLKIT_ONLY + '''
    def read(self, query):
        answers = []
        for payload in ('{"target": "client", "method": "reset", "kwargs": {}}', "not json", "[1, 2]",
                        '{"target": "collection", "method": "add", "name": "none", "kwargs": {"ids": ["a"]}}',
                        '{"target": "client", "method": "list_collections", "kwargs": {"embedding_function": 1}}',
                        '{"target": "client", "method": "get_or_create_collection", "kwargs": {"name": "packs"}}',
                        '{"target": "collection", "method": "add", "name": "packs", "kwargs": {"ids": ["a"], '
                        '"embeddings": {"float32": "not base64!", "rows": 1}}}'):
            answers.append(self.toolkit._ask({"op": "chroma", "payload": payload})["payload"][:120])
        try:
            self.toolkit.chroma.get_collection("missing")
        except ValueError as exc:
            answers.append(str(exc)[:40])
        return "\\n".join(answers)
'''
    with _written(probing) as sandbox:
        outcome = sandbox.read({"text": "q"})
    assert outcome.ok, outcome.describe()
    lines = outcome.value.split("\n")
    assert all('"ok": false' in line for line in lines[:5] + lines[6:7]), lines
    assert "no client method 'reset'" in lines[0] and "takes no argument 'embedding_function'" in lines[4]
    assert '"ok": true' in lines[5] and "packed vectors that do not unpack" in lines[6]
    assert lines[7].startswith("NotFoundError")


def test_the_score_equals_the_serial_protocols_for_reads_that_change_nothing():
    task = Task(name="t", texts=[RawText(id=f"s{i}", text=t) for i, t in enumerate(
        ["Alice moved to Paris in May.", "Bob adopted a dog named Rex.", "Carol paints on Sundays."])],
        items=[Item(id=f"q{i}", question=q, answer=a, category="1") for i, (q, a) in enumerate(
            [("Where did Alice move?", "Paris"), ("What is Bob's dog called?", "Rex"), ("When does Carol paint?",
                                                                                        "Sundays")])])
    for seed in ("memskill", "rulemem", "vector_search", "memory_lace"):
        runs = [evaluate(seed_source(seed), task, OfflineBackend(), HashingEmbedder(),
                         concurrency=EvalConcurrency(in_flight=1, episodes=1, readers=readers)) for readers in (1, 4)]
        assert all(r.violation is None for r in runs)
        assert runs[0].score == runs[1].score
        assert [r.context for r in runs[0].results] == [r.context for r in runs[1].results]
    carrier = MUTATING
    forked = EvalConcurrency(in_flight=1, episodes=1, readers=4)  # the offline agent's own default reads serially
    forward, backward = (evaluate(carrier, task, OfflineBackend(), HashingEmbedder(), items=items, concurrency=forked)
                         for items in (None, list(reversed(task.items))))
    assert {r.id: r.context for r in forward.results} == {r.id: r.context for r in backward.results}


HOSTILE_FORK = HEAD + '''
import os, time
class KnowledgeBase:
    def __init__(self, toolkit):
        pass
    def write(self, item, raw_text):
        if raw_text == "bomb":
            for _ in range(1000):
                try:
                    if os.fork() == 0:
                        time.sleep(600)
                        os._exit(0)
                except OSError:
                    break
        elif raw_text == "one":
            if os.fork() == 0:
                time.sleep(600)
                os._exit(0)
    def read(self, query):
        if query.text == "fork":
            if os.fork() == 0:
                time.sleep(600)
                os._exit(0)
        return "ok"
'''


@pytest.fixture(scope="module")
def unguarded():
    """Python's guards off: the program reaches os.fork, as one that escaped them would."""
    server = ForkServer(test_disable=frozenset({"python-guards"}))
    yield server
    server.close()


def _processes_in(pid_namespace: str) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.readlink(f"/proc/{entry}/ns/pid") == pid_namespace
            except OSError:
                pass
    return count


@pytest.mark.parametrize("text", ["one", "bomb"])
def test_a_program_that_forks_in_write_is_stopped_and_leaves_nothing(unguarded, text):
    with Sandbox(HOSTILE_FORK, limits=LIMITS, readers=3, fork_server=unguarded) as sandbox:
        assert sandbox.start().ok
        namespace = os.readlink(f"/proc/{sandbox.host_pid}/ns/pid")
        outcome = sandbox.write({"text": text}, text)
        assert outcome.violation and outcome.kind == "tasks", outcome.describe()
    assert _processes_in(namespace) == 0  # every process it started died with its PID 1


def test_a_fork_bomb_stays_under_the_task_cap(unguarded):
    with Sandbox(HOSTILE_FORK, limits=LIMITS, readers=3, fork_server=unguarded) as sandbox:
        assert sandbox.start().ok
        namespace = os.readlink(f"/proc/{sandbox.host_pid}/ns/pid")
        sandbox._signal(__import__("signal").SIGCONT)
        sandbox._sock.settimeout(20)
        # Before the host's check kills it: count what the kernel let it start.
        from mstar_ray.sandbox import wire
        wire.send(sandbox._sock, {"op": "write", "call": 2, "item": {"text": "bomb"}, "raw_text": "bomb"})
        assert wire.recv(sandbox._sock)["op"] == "done"
        assert 2 <= _processes_in(namespace) <= LIMITS.max_tasks
    assert _processes_in(namespace) == 0


def test_a_reader_that_forks_is_stopped(unguarded):
    with Sandbox(HOSTILE_FORK, limits=LIMITS, readers=3, fork_server=unguarded) as sandbox:
        assert sandbox.start().ok and sandbox.write({"text": "t"}, "t").ok
        assert sandbox.snapshot() is None
        outcome = sandbox.read({"text": "fork"})
        assert outcome.violation and outcome.kind == "tasks", outcome.describe()


def test_without_readers_the_filter_refuses_a_fork(unguarded):
    with Sandbox(HOSTILE_FORK, limits=LIMITS, readers=1, fork_server=unguarded) as sandbox:
        assert sandbox.start().ok
        outcome = sandbox.write({"text": "one"}, "one")
        assert not outcome.ok and "PermissionError" in outcome.message, outcome.describe()
