"""Run logs: versioned Arrow schemas, crash-safe streaming appends, torn-tail-tolerant reads, and program
sources by hash. Pure (no Ray): only the driver writes, anything reads."""

from mstar_ray.runlog.reader import LogFormatError, TornTailWarning, read_rows, read_table
from mstar_ray.runlog.schemas import (
    ROWS,
    SCHEMA_VERSION,
    SCHEMAS,
    CandidateRow,
    EventRow,
    LLMCallRow,
    ResultRow,
    Row,
)
from mstar_ray.runlog.sources import load_source, store_source
from mstar_ray.runlog.writer import LogWriter

__all__ = [
    "ROWS",
    "SCHEMAS",
    "SCHEMA_VERSION",
    "CandidateRow",
    "EventRow",
    "LLMCallRow",
    "LogFormatError",
    "LogWriter",
    "ResultRow",
    "Row",
    "TornTailWarning",
    "load_source",
    "read_rows",
    "read_table",
    "store_source",
]
