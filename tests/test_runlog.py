"""Run logs: schemas, round trips, appends across sessions, real SIGKILLs, torn tails, outside readers."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from pydantic import ValidationError

from mstar_ray.program_id import program_id
from mstar_ray.runlog import (
    ROWS,
    SCHEMA_VERSION,
    SCHEMAS,
    CandidateRow,
    EventRow,
    LLMCallRow,
    LogFormatError,
    LogWriter,
    ResultRow,
    Row,
    TornTailWarning,
    load_source,
    read_rows,
    read_table,
    store_source,
)
from mstar_ray.runlog.layout import log_path, program_path

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def candidate(i: int, **changes) -> CandidateRow:
    fields = dict(
        id=f"{i:016x}", parent=None if i == 0 else f"{i - 1:016x}", origin="seed" if i == 0 else "mutation:crossover",
        commit_message=f"candidate {i}: ünïcode ✓", patch=None if i == 0 else "*** Begin Patch\n...", edit_format="v4a",
        status="evaluated", iteration=i, static_score=0.5 + i / 100, judge_score=None,
        category_scores={"single-hop": 0.25 * i, "multi-hop": 1.0}, wall_seconds=1.5, prompt_tokens=10**10,
        completion_tokens=7, cost_usd=0.0012, cache_hits=3, requests=4, worker_pid=4242, node_id="node-a",
        finished_at=T0 + timedelta(seconds=i),
    )
    return CandidateRow(**(fields | changes))


SAMPLES: dict[str, list[Row]] = {
    "candidates": [
        candidate(0),
        candidate(1, status="violation", violation_kind="timeout", violation_message="took 31 s", category_scores={}),
        # another zone: stored as the same instant in UTC
        candidate(2, finished_at=datetime(2025, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))),
    ],
    "results": [
        ResultRow(candidate="a" * 16, question_id="conv-1:q3", split="static", category="multi-hop", question="Who?",
                  expected="Ann", prediction="Ann", score=1.0, judge=0.9, query='{"who": "Ann"}', context="...",
                  latency_s=0.02),
        ResultRow(candidate="a" * 16, question_id="conv-1:q4", split="test", category="temporal", question="When?",
                  expected="May", prediction="", score=0.0, error="Timeout: 5 s"),
    ],
    "llm_calls": [
        LLMCallRow(at=T0, role="task", model="smollm2", step="answer", prompt_tokens=120, completion_tokens=9,
                   latency_s=0.4, cache_hit=False, cost_usd=0.0, retries=2, candidate="b" * 16),
        LLMCallRow(at=T0, role="reflector", model="gpt-x", step="reflect", cache_hit=True),
    ],
    "events": [
        EventRow(at=T0, kind="submitted", candidate="c" * 16, iteration=3, actor="Evaluator-1", node_id="node-b"),
        EventRow(at=T0, kind="resumed", detail="3 in flight re-issued"),
    ],
}


def ids(run_dir: Path) -> list[str]:
    return read_table(run_dir, "candidates").column("id").to_pylist()


def message_types(path: Path) -> list[str]:
    reader = ipc.MessageReader.open_stream(pa.OSFile(str(path)))
    return [message.type for message in reader]


def test_schemas_are_versioned_and_match_their_row_models():
    assert set(SCHEMAS) == set(ROWS) == {"candidates", "results", "llm_calls", "events"}
    for table, schema in SCHEMAS.items():
        assert schema.metadata == {b"mstar_ray.schema_version": str(SCHEMA_VERSION).encode(),
                                   b"mstar_ray.table": table.encode()}
        assert schema.names == list(ROWS[table].model_fields)
    assert SCHEMAS["candidates"].field("category_scores").type == pa.map_(pa.string(), pa.float64())
    assert SCHEMAS["candidates"].field("finished_at").type == pa.timestamp("us", tz="UTC")


@pytest.mark.parametrize("table", sorted(SAMPLES))
def test_each_table_round_trips(tmp_path, table):
    with LogWriter(tmp_path, table) as writer:
        assert writer.append(SAMPLES[table][0]) == 1
        assert writer.append(SAMPLES[table][1:]) == len(SAMPLES[table]) - 1
    assert read_rows(tmp_path, table) == SAMPLES[table]
    loaded = read_table(tmp_path, table)
    assert loaded.schema.equals(SCHEMAS[table], check_metadata=True)
    assert loaded.to_pylist(maps_as_pydicts="strict") == [row.to_record() for row in SAMPLES[table]]


def test_row_models_are_the_typed_boundary(tmp_path):
    with pytest.raises(ValidationError):
        candidate(1, origin="mutation")  # a mutation names its kind
    with pytest.raises(ValidationError):
        candidate(1, status="done")
    with pytest.raises(ValidationError):
        candidate(1, finished_at=datetime(2025, 1, 1))  # naive: which zone?
    with pytest.raises(ValidationError):
        ResultRow(candidate="x", question_id="q", split="static", category="c", question="?", expected="a",
                  prediction="a", score=1.0, query="{not json")
    with LogWriter(tmp_path, "candidates") as writer, pytest.raises(TypeError, match="takes CandidateRow"):
        writer.append(SAMPLES["events"][0])
    with pytest.raises(ValueError, match="unknown run-log table"):
        LogWriter(tmp_path, "candidate")


def test_missing_and_empty_tables_read_as_empty_with_their_schema(tmp_path):
    assert read_table(tmp_path, "results").schema == SCHEMAS["results"]
    assert read_table(tmp_path, "results").num_rows == 0
    LogWriter(tmp_path, "events").close()  # a header, no batches
    assert read_table(tmp_path, "events").num_rows == 0
    log_path(tmp_path, "llm_calls").touch()
    assert read_rows(tmp_path, "llm_calls") == []
    with LogWriter(tmp_path, "llm_calls") as writer:  # a zero-byte file gets its header
        writer.append(SAMPLES["llm_calls"])
    assert read_rows(tmp_path, "llm_calls") == SAMPLES["llm_calls"]


def test_appends_continue_across_writer_sessions_with_one_header(tmp_path):
    with LogWriter(tmp_path, "candidates") as writer:
        writer.append([candidate(0), candidate(1)])
    with LogWriter(tmp_path, "candidates") as writer:
        writer.append(candidate(2))
        writer.append([candidate(3), candidate(4)])
    assert ids(tmp_path) == [f"{i:016x}" for i in range(5)]
    assert message_types(log_path(tmp_path, "candidates")) == ["schema"] + ["record batch"] * 3
    # plain pyarrow reads the continued stream as one
    assert ipc.open_stream(log_path(tmp_path, "candidates")).read_all().num_rows == 5


def test_a_second_writer_on_the_same_log_is_refused(tmp_path):
    with LogWriter(tmp_path, "events"), pytest.raises(RuntimeError, match="already open for writing"):
        LogWriter(tmp_path, "events")
    LogWriter(tmp_path, "events").close()  # free again once closed


def test_a_failed_append_is_rolled_back(tmp_path, monkeypatch):
    with LogWriter(tmp_path, "candidates") as writer:
        writer.append(candidate(0))

        def no_space(fd: int) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "fsync", no_space)
        with pytest.raises(OSError, match="No space"):
            writer.append(candidate(1))
        monkeypatch.undo()
        writer.append(candidate(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ids(tmp_path) == [f"{i:016x}" for i in (0, 2)]


@pytest.mark.parametrize("cut", ["one byte", "inside header of message", "inside body"])
def test_a_torn_tail_is_skipped_with_a_warning_then_truncated_by_the_next_writer(tmp_path, cut):
    path = log_path(tmp_path, "candidates")
    with LogWriter(tmp_path, "candidates") as writer:
        writer.append([candidate(0), candidate(1)])
        complete = path.stat().st_size
        writer.append(candidate(2, patch="p" * 5000))
    last = path.stat().st_size - complete
    keep = {"one byte": 1, "inside header of message": 6, "inside body": last - 100}[cut]
    os.truncate(path, complete + keep)

    with pytest.warns(TornTailWarning, match=rf"candidates\.arrows: skipped a torn tail of {keep} bytes after offset {complete}"):
        assert ids(tmp_path) == [f"{i:016x}" for i in (0, 1)]
    with pytest.raises((pa.ArrowInvalid, OSError)):  # what plain pyarrow does with it: why read_table exists
        ipc.open_stream(path).read_all()

    with pytest.warns(TornTailWarning, match=rf"truncated a torn tail of {keep} bytes"):
        writer = LogWriter(tmp_path, "candidates")
    with writer:
        writer.append(candidate(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ids(tmp_path) == [f"{i:016x}" for i in (0, 1, 3)]
    assert ipc.open_stream(path).read_all().num_rows == 3


def test_damage_before_the_tail_raises_instead_of_being_cut_off(tmp_path):
    path = log_path(tmp_path, "candidates")
    with LogWriter(tmp_path, "candidates") as writer:
        header = path.stat().st_size
        writer.append(candidate(0))
        writer.append(candidate(1))
    data = bytearray(path.read_bytes())
    data[header + 20 : header + 36] = b"\xab" * 16  # the first batch's metadata, not its tail
    path.write_bytes(bytes(data))
    with pytest.raises(LogFormatError, match=rf"damaged message at offset {header}"):
        read_table(tmp_path, "candidates")
    with pytest.raises(LogFormatError, match="damaged message"):
        LogWriter(tmp_path, "candidates")
    assert path.stat().st_size == len(data)  # nothing truncated


# The child appends small batches (1 to 3 rows) and one 4 MB batch at a chosen append; it says "big" on
# stdout as that batch's write() begins, so the parent's SIGKILL can land inside the write (killed at
# once, it mostly tears the batch), inside the fsync or after it, not only between appends. It prints
# the row count after each append returns.
CHILD = textwrap.dedent(
    """
    import os, sys
    from mstar_ray.runlog import CandidateRow, LogWriter

    def announced_write(fd, data, write=os.write):
        if len(data) > 1_000_000:
            print("big", flush=True)
        return write(fd, data)

    os.write = announced_write
    run_dir, written, big_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with LogWriter(run_dir, "candidates") as writer:
        print("ready", flush=True)
        for append in range(10**9):
            n = 1 if append == big_at else 1 + append % 3
            writer.append([
                CandidateRow(id=f"{i:016x}", origin="reflection", status="evaluated", iteration=i,
                             patch="x" * (4_000_000 if append == big_at else 100))
                for i in range(written, written + n)
            ])
            written += n
            print(written, flush=True)
    """
)


def test_a_sigkilled_writer_loses_at_most_the_append_in_flight(tmp_path):
    rng = random.Random(5)
    written = 0
    for trial in range(5):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path), str(written), str(rng.randint(0, 30))],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert child.stdout.readline() == "ready\n", child.stderr.read()
        lines = []
        while (line := child.stdout.readline()) not in ("big\n", ""):
            lines.append(line)
        time.sleep(0 if trial % 2 == 0 else rng.uniform(0, 0.01))  # mid-write, or anywhere later
        child.send_signal(signal.SIGKILL)
        # read the rest through the same text stream: readline() may have buffered counts printed after
        # "big", which communicate() (reading the raw pipe) would never see
        out, err = child.stdout.read(), child.stderr.read()
        child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL, err
        counts = [int(token) for token in "".join(lines).split() + out.split() if token != "big"]
        confirmed = counts[-1] if counts else written

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = ids(tmp_path)
        assert all(issubclass(w.category, TornTailWarning) for w in caught)
        # every confirmed row, in order, then at most the one batch in flight (<= 3 rows), whole
        assert confirmed <= len(got) <= confirmed + 3, (trial, confirmed, len(got))
        assert got == [f"{i:016x}" for i in range(len(got))]
        written = len(got)
    assert written > 0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornTailWarning)
        with LogWriter(tmp_path, "candidates") as writer:
            writer.append(CandidateRow(id=f"{written:016x}", origin="seed", status="evaluated", iteration=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ids(tmp_path) == [f"{i:016x}" for i in range(written + 1)]


READ_WITHOUT_MSTAR_RAY = textwrap.dedent(
    """
    import json, sys
    import pyarrow.ipc as ipc

    counts = {}
    for table in ("candidates", "results", "llm_calls", "events"):
        loaded = ipc.open_stream(f"{sys.argv[1]}/{table}.arrows").read_all()
        counts[table] = [loaded.num_rows, loaded.schema.metadata[b"mstar_ray.schema_version"].decode()]
    scores = ipc.open_stream(f"{sys.argv[1]}/candidates.arrows").read_all().column("category_scores")
    counts["multi-hop"] = [dict(row).get("multi-hop") for row in scores.to_pylist()]
    assert "mstar_ray" not in sys.modules, sorted(m for m in sys.modules if m.startswith("mstar_ray"))
    print(json.dumps(counts))
    """
)


def write_samples(run_dir: Path) -> None:
    for table, rows in SAMPLES.items():
        with LogWriter(run_dir, table) as writer:
            writer.append(rows[:1])
        with LogWriter(run_dir, table) as writer:
            writer.append(rows[1:])


def test_logs_read_with_plain_pyarrow_without_importing_mstar_ray(tmp_path):
    write_samples(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", READ_WITHOUT_MSTAR_RAY, str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "candidates": [3, str(SCHEMA_VERSION)], "results": [2, str(SCHEMA_VERSION)], "llm_calls": [2, str(SCHEMA_VERSION)], "events": [2, str(SCHEMA_VERSION)],
        "multi-hop": [1.0, None, 1.0],
    }


READ_WITH_PANDAS_AND_DUCKDB = textwrap.dedent(
    """
    import json, sys
    import duckdb
    import pyarrow.ipc as ipc

    frame = ipc.open_stream(f"{sys.argv[1]}/candidates.arrows").read_pandas(maps_as_pydicts="strict")
    candidates = ipc.open_stream(f"{sys.argv[1]}/candidates.arrows").read_all()
    best = duckdb.sql("SELECT id, category_scores['multi-hop'] AS mh FROM candidates ORDER BY id LIMIT 1").fetchall()
    assert "mstar_ray" not in sys.modules
    print(json.dumps({"ids": frame["id"].tolist(), "first_scores": frame["category_scores"].tolist()[0],
                      "dtype": str(frame["finished_at"].dtype), "duckdb": [list(r) for r in best]}))
    """
)


def test_logs_read_with_pandas_and_duckdb_without_importing_mstar_ray(tmp_path):
    write_samples(tmp_path)
    out = subprocess.run([sys.executable, "-c", READ_WITH_PANDAS_AND_DUCKDB, str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    read = json.loads(out.stdout)
    assert read["ids"] == [row.id for row in SAMPLES["candidates"]]
    assert read["first_scores"] == {"single-hop": 0.0, "multi-hop": 1.0}
    assert read["dtype"] == "datetime64[us, UTC]"
    first = min(SAMPLES["candidates"], key=lambda row: row.id)
    assert read["duckdb"] == [[first.id, first.category_scores.get("multi-hop")]]


@pytest.mark.parametrize(("offset", "message"), [
    (1, "schema version {found}, newer than version {ours} that this mstar_ray reads: upgrade mstar_ray"),
    (-1, "schema version {found}, older than version {ours} that this mstar_ray writes: read or resume it with"),
])
def test_a_log_from_another_schema_version_is_refused(tmp_path, offset, message):
    found = SCHEMA_VERSION + offset
    other = SCHEMAS["events"].with_metadata({b"mstar_ray.schema_version": str(found).encode(), b"mstar_ray.table": b"events"})
    with ipc.new_stream(log_path(tmp_path, "events"), other) as stream:
        stream.write_table(pa.Table.from_pylist([SAMPLES["events"][0].to_record()], schema=other))
    message = message.format(found=found, ours=SCHEMA_VERSION)
    with pytest.raises(LogFormatError, match=message):
        read_table(tmp_path, "events")
    with pytest.raises(LogFormatError, match=message):
        LogWriter(tmp_path, "events")
    with LogWriter(tmp_path, "results") as writer:
        writer.append(SAMPLES["results"])
    os.replace(log_path(tmp_path, "results"), log_path(tmp_path, "llm_calls"))
    with pytest.raises(LogFormatError, match="is not an mstar_ray 'llm_calls' log"):
        read_table(tmp_path, "llm_calls")


def test_sources_are_stored_once_by_hash(tmp_path):
    source = "def f():\r\n    return 'ü'\n"
    pid = store_source(tmp_path, source)
    assert pid == program_id(source)
    mtime = program_path(tmp_path, pid).stat().st_mtime_ns
    assert store_source(tmp_path, source) == pid
    assert program_path(tmp_path, pid).stat().st_mtime_ns == mtime  # not rewritten
    assert load_source(tmp_path, pid) == source  # byte for byte, \r\n included
    assert [p.name for p in (tmp_path / "programs").iterdir()] == [f"{pid}.py"]  # no temporary left
    program_path(tmp_path, pid).write_text("tampered")
    with pytest.raises(ValueError, match="does not hash to"):
        load_source(tmp_path, pid)
