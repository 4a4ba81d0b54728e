"""Cost of crash safety in the run logs, measured in one run.

Appends ``results`` rows (the busiest table: one row per candidate x question) through ``LogWriter``
twice into a fresh log each: one row per append, so one fsync per row, then ``--batch`` rows per append,
as the driver does with a candidate's results. Prints rows/s of each and their ratio from this run, and
checks that every row reads back. fsync cost depends on the disk under ``--dir`` (default: the system
temporary directory); on tmpfs it is free and the ratio shows only the per-batch overhead.

    .venv/bin/python scripts/bench_runlog.py [--rows 2000] [--batch 100] [--dir DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.runlog import LogWriter, ResultRow, read_table  # noqa: E402


def rows(n: int) -> list[ResultRow]:
    return [
        ResultRow(candidate="0123456789abcdef", question_id=f"conv-{i // 50}:q{i % 50}", split="static",
                  category="multi-hop", question="Where did Ann move after she left Boston?", expected="Lisbon",
                  prediction="Lisbon", score=1.0, judge=None, query='{"topic": "Ann", "k": 5}',
                  context="Ann said she had moved. " * 20, latency_s=0.03)
        for i in range(n)
    ]


def append_rate(run_dir: Path, batch: int, data: list[ResultRow]) -> float:
    """Rows per second appending ``data`` ``batch`` rows at a time, each append fsync'ed."""
    start = time.perf_counter()
    with LogWriter(run_dir, "results") as writer:
        for i in range(0, len(data), batch):
            writer.append(data[i : i + batch])
    seconds = time.perf_counter() - start
    assert read_table(run_dir, "results").num_rows == len(data)
    return len(data) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--dir", type=Path, default=None, help="where to make the temporary run directories")
    args = parser.parse_args()
    data = rows(args.rows)
    with tempfile.TemporaryDirectory(dir=args.dir) as one, tempfile.TemporaryDirectory(dir=args.dir) as many:
        per_row = append_rate(Path(one), 1, data)
        batched = append_rate(Path(many), args.batch, data)
        print(f"directory: {Path(one).parent}")
    print(f"{args.rows} results rows, fsync per append")
    print(f"  1 row per append:       {per_row:10,.0f} rows/s")
    print(f"  {args.batch} rows per append:  {batched:10,.0f} rows/s")
    print(f"  batched / per-row:      {batched / per_row:10.1f}x")


if __name__ == "__main__":
    main()
