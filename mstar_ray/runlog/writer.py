"""Append rows to a run log so that a crash at any instant loses at most the append in flight.

Format: ``RUN_DIR/<table>.arrows`` is one Arrow IPC *stream*: a schema message, then one record-batch
message per ``append``, and no end-of-stream marker (a reader takes end of file as end of stream).

Appending across restarts. A stream has exactly one schema header, so a resumed run must not open a new
``pyarrow.ipc.RecordBatchStreamWriter`` on the old file (that would write a second header into the
middle). Of the two ways out, (a) one file continued across sessions or (b) a new part file per session
read as a set, this is (a): every session after the first writes only record-batch messages
(``RecordBatch.serialize()`` is exactly that message), after checking the file: its header must be this
table at a version we write, and a torn tail left by a crash is truncated back to the last complete batch
(with a ``TornTailWarning``) before anything is appended. One file per table keeps every outside reader a
one-liner; part files would add a glob and a concat to each of them and would still need the torn-tail
handling within the last part. (Note that ``pyarrow.dataset`` reads only the IPC *file* format, whose
footer cannot be appended to crash-safely, so neither choice makes the logs a dataset.)

Crash safety. The header is written to a temporary file, fsync'ed and renamed into place, so a log is
either absent or starts with a whole header. Each append is one ``write`` of a whole batch then an
``fsync``: when ``append`` returns the rows are on disk; a kill during the write leaves at most a torn
last message, which every reader in ``mstar_ray.runlog.reader`` skips with a warning and the next writer
truncates. A write that fails with an exception (disk full, Ctrl-C) is rolled back at once. An advisory
``flock`` refuses a second writer on the same log. Every append pays an fsync, so callers should append
a candidate's results as one batch, not row by row (``scripts/bench_runlog.py`` measures the gap).

Reading without mstar_ray. After a crash, until a writer reopens the log, the file may end in a torn
batch on which ``read_all()`` raises; ``for batch in ipc.open_stream(path)`` then yields every complete
batch before raising. Otherwise:

    import pyarrow.ipc as ipc
    candidates = ipc.open_stream("RUN_DIR/candidates.arrows").read_all()        # a pyarrow.Table
    df = candidates.to_pandas(maps_as_pydicts="strict")                        # pandas, maps as dicts
    duckdb.sql("SELECT id, category_scores['multi-hop'] FROM candidates")     # DuckDB, zero-copy

DuckDB has no built-in reader for IPC streams; from Python it scans the pyarrow table above by its
variable name. From SQL alone, the community extension (``INSTALL nanoarrow FROM community``) reads
``FROM 'RUN_DIR/candidates.arrows'``; that path is documented by DuckDB but not tested here.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import pyarrow as pa

from mstar_ray.runlog.layout import log_path
from mstar_ray.runlog.reader import scan, warn_torn
from mstar_ray.runlog.schemas import ROWS, Row, schema_for


def write_atomic(path: Path, data: bytes) -> None:
    """Write a whole file or nothing: a temporary file in the same directory, fsync'ed, renamed over."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _write_all(fd: int, data: bytes | pa.Buffer) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(directory: Path) -> None:
    """Make a created or renamed entry survive a power cut, not only a killed process."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LogWriter:
    """The only writer of one table's log in a run directory; a context manager."""

    def __init__(self, run_dir: str | Path, table: str):
        self.table = table
        self.schema = schema_for(table)
        self.row_type = ROWS[table]
        self.path = log_path(run_dir, table)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists() or self.path.stat().st_size == 0:
            write_atomic(self.path, self.schema.serialize().to_pybytes())
        self._fd: int | None = os.open(self.path, os.O_RDWR)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.close()
            raise RuntimeError(f"{self.path} is already open for writing (is another driver using this run?)") from None
        try:
            scanned = scan(self.path, table)
        except BaseException:
            self.close()
            raise
        if scanned.torn:
            warn_torn(self.path, scanned, "truncated")
            os.ftruncate(self._fd, scanned.end)
            os.fsync(self._fd)
        self._end = os.lseek(self._fd, scanned.end, os.SEEK_SET)

    def append(self, rows: Row | Sequence[Row]) -> int:
        """Append one row or a list as one batch; on return they are on disk. Returns the rows appended."""
        if self._fd is None:
            raise ValueError(f"{self.path}: append after close")
        batch_rows = [rows] if isinstance(rows, Row) else list(rows)
        if not batch_rows:
            return 0
        for row in batch_rows:
            if not isinstance(row, self.row_type):
                raise TypeError(f"{self.table} takes {self.row_type.__name__}, not {type(row).__name__}")
        batch = pa.RecordBatch.from_pylist([row.to_record() for row in batch_rows], schema=self.schema)
        try:
            _write_all(self._fd, batch.serialize())
            os.fsync(self._fd)
        except BaseException:
            os.ftruncate(self._fd, self._end)  # never leave half a batch for the next append to follow
            os.lseek(self._fd, self._end, os.SEEK_SET)
            raise
        self._end = os.lseek(self._fd, 0, os.SEEK_CUR)
        return len(batch_rows)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # also releases the flock
            self._fd = None

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
