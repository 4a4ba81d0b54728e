"""Read a run log back, keeping every complete record and skipping a torn tail.

A log is an Arrow IPC stream (one schema message, then record-batch messages; see ``writer``). A crash
can cut the last message short. Plain ``pyarrow.ipc.open_stream(...).read_all()`` then raises on the
whole file, so this reader walks the messages one by one, remembers the offset after the last complete
batch, and turns whatever follows it into a ``TornTailWarning`` naming the file and the bytes skipped.
While a run is live the writer may be mid-append: a reader can then see the batch in flight as a torn
tail; it is whole on the next read.

A complete message that does not decode or validate is not a torn tail but damage, and raises: the
writer would otherwise truncate good records after it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Sequence
from typing import Literal, overload

import pyarrow as pa
import pyarrow.ipc as ipc

from mstar_ray.runlog.layout import log_path
from mstar_ray.runlog.schemas import ROWS, SCHEMA_VERSION, TABLE_KEY, VERSION_KEY, Row, schema_for
from mstar_ray.runlog.schemas import CandidateRow, EventRow, LLMCallRow, ResultRow


class TornTailWarning(RuntimeWarning):
    """The end of a log was cut short by a crash (or is being written right now) and was skipped."""


class LogFormatError(ValueError):
    """A file is not a run log of the expected table and version, or is damaged before its tail."""


@dataclass(frozen=True)
class Scan:
    """What is in a log file: its complete batches, where they end and how many bytes follow."""

    schema: pa.Schema
    batches: list[pa.RecordBatch]
    end: int
    torn: int


def check_schema(found: pa.Schema, table: str, path: Path) -> None:
    """Refuse a log this version cannot read, saying why: another table, a newer version, a changed schema."""
    meta = found.metadata or {}
    if meta.get(TABLE_KEY) != table.encode() or VERSION_KEY not in meta:
        raise LogFormatError(f"{path} is not an mstar_ray {table!r} log (schema metadata {meta!r})")
    version = int(meta[VERSION_KEY])
    if version > SCHEMA_VERSION:
        raise LogFormatError(
            f"{path} was written with run-log schema version {version}, newer than version {SCHEMA_VERSION} "
            "that this mstar_ray reads: upgrade mstar_ray to read this run"
        )
    if version < SCHEMA_VERSION:
        raise LogFormatError(
            f"{path} was written with run-log schema version {version}, older than version {SCHEMA_VERSION} that "
            "this mstar_ray writes: read or resume it with the mstar_ray release that started the run"
        )
    if not found.equals(schema_for(table), check_metadata=False):
        raise LogFormatError(f"{path} claims schema version {version} but its {table!r} columns differ:\n{found}")


def scan(path: Path, table: str) -> Scan:
    """Read the complete batches of a non-empty log; ``torn`` is the count of bytes after the last one.

    The file is read once, up to its end at that moment, so a writer appending meanwhile cannot make a
    short read look like damage. A torn tail is a message that runs past that end; a message that fails
    before it (the reader stopped short of the end) is damage and raises.
    """
    with pa.OSFile(str(path), "rb") as file:
        data = file.read_buffer()
    source = pa.BufferReader(data)
    messages = ipc.MessageReader.open_stream(source)
    try:
        schema = ipc.read_schema(messages.read_next_message())
    except (StopIteration, pa.ArrowInvalid, OSError) as error:
        raise LogFormatError(f"{path} has no complete Arrow stream header: {error}") from None
    check_schema(schema, table, path)
    batches: list[pa.RecordBatch] = []
    end = source.tell()
    while True:
        try:
            message = messages.read_next_message()
        except StopIteration:
            break  # end of stream (or an end-of-stream marker, after which nothing is ours)
        except (pa.ArrowInvalid, OSError) as error:
            if source.tell() < data.size:
                raise LogFormatError(f"{path}: damaged message at offset {end}: {error}") from None
            break  # the last message runs past the end of the file: a torn tail
        try:
            if message.type != "record batch":
                raise ValueError(f"unexpected {message.type!r} message")
            batch = ipc.read_record_batch(message, schema)
            batch.validate(full=True)
        except (ValueError, pa.ArrowException) as error:
            raise LogFormatError(f"{path}: damaged record batch at offset {end}: {error}") from None
        batches.append(batch)
        end = source.tell()
    return Scan(schema, batches, end, data.size - end)


def warn_torn(path: Path, scanned: Scan, action: str) -> None:
    warnings.warn(
        f"{path}: {action} a torn tail of {scanned.torn} bytes after offset {scanned.end} "
        f"(a write cut short by a crash, or one in progress)",
        TornTailWarning,
        stacklevel=3,
    )


def read_table(run_dir: str | Path, table: str) -> pa.Table:
    """All complete rows of a table, in append order; an empty table with the schema if none were written."""
    schema = schema_for(table)
    path = log_path(run_dir, table)
    if not path.exists() or path.stat().st_size == 0:
        return schema.empty_table()
    scanned = scan(path, table)
    if scanned.torn:
        warn_torn(path, scanned, "skipped")
    return pa.Table.from_batches(scanned.batches, schema=schema)


@overload
def read_rows(run_dir: str | Path, table: Literal["candidates"]) -> list[CandidateRow]: ...
@overload
def read_rows(run_dir: str | Path, table: Literal["results"]) -> list[ResultRow]: ...
@overload
def read_rows(run_dir: str | Path, table: Literal["llm_calls"]) -> list[LLMCallRow]: ...
@overload
def read_rows(run_dir: str | Path, table: Literal["events"]) -> list[EventRow]: ...
@overload
def read_rows(run_dir: str | Path, table: str) -> list[Row]: ...
def read_rows(run_dir: str | Path, table: str) -> Sequence[Row]:
    """The rows of a table as validated row models (``CandidateRow`` for ``candidates``, ...)."""
    records = read_table(run_dir, table).to_pylist(maps_as_pydicts="strict")
    return [ROWS[table].model_validate(record) for record in records]
