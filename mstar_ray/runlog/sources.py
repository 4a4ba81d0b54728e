"""Program sources, stored once each under their content hash.

A run can meet the same program many times (a duplicate mutation, a resume re-issuing work); its source
is written the first time only, whole or not at all, and every log row refers to it by id. The text is
stored as UTF-8 bytes, untouched by newline translation, so the file hashes back to its name.
"""

from __future__ import annotations

from pathlib import Path

from mstar_ray.program_id import program_id
from mstar_ray.runlog.layout import program_path
from mstar_ray.runlog.writer import write_atomic


def store_source(run_dir: str | Path, source: str) -> str:
    """Write ``programs/<id>.py`` unless it exists; return the id."""
    pid = program_id(source)
    path = program_path(run_dir, pid)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, source.encode())
    return pid


def load_source(run_dir: str | Path, pid: str) -> str:
    """The source stored under ``pid``; raises if the file no longer hashes to its name."""
    source = program_path(run_dir, pid).read_bytes().decode()
    if program_id(source) != pid:
        raise ValueError(f"{program_path(run_dir, pid)} does not hash to {pid}: the file was changed")
    return source
