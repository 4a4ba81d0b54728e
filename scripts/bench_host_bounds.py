"""The host's own work on candidate data, on the shapes that made it super-linear: each measured at a size and
at 8 times that size in one run, with the ratio (linear: about 8; quadratic: about 64). ``--root`` measures
another checkout of the code (say, main's) with this same script:

    .venv/bin/python scripts/bench_host_bounds.py [--root PATH] [--size N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]), help="the code tree to measure")
    parser.add_argument("--size", type=int, default=4000, help="the smaller size, in characters or bytes")
    args = parser.parse_args()
    sys.path.insert(0, args.root)
    from mstar_ray import text as tx
    from mstar_ray.families.qa import offline as answer
    from mstar_ray.sandbox_host.frames import ProtocolError, parse_frame

    assert tx.__file__.startswith(args.root), f"measuring {tx.__file__}, not {args.root}"
    tokens = getattr(answer, "_span_tokens", None) or answer._SPAN_TOKEN_RE.findall

    def frame(body: bytes) -> None:
        try:
            parse_frame(body)
        except ProtocolError:
            pass

    cases = [
        ("frame: 20 brackets, then escaped quotes", frame,
         lambda n: b'{"op": "done", "x": ' + b"[" * 20 + b'"' + b'\\"' * (n // 2) + b"}"),
        ("split_sentences: a run of '!' and no boundary", tx.split_sentences, lambda n: "!" * n + "a"),
        ("offline span tokens: a run of '$'", tokens, lambda n: "$" * n),
        ("find_numbers: '8 May ' repeated", tx.find_numbers, lambda n: ("8 May " * n)[:n]),
    ]
    print(f"code: {args.root}")
    for name, run, make in cases:
        times = []
        for size in (args.size, 8 * args.size):
            data = make(size)
            started = time.perf_counter()
            run(data)
            times.append(time.perf_counter() - started)
        print(f"{name}: {args.size:,} -> {times[0]:.4f} s; {8 * args.size:,} -> {times[1]:.4f} s; "
              f"ratio {times[1] / max(times[0], 1e-6):.0f}x")


if __name__ == "__main__":
    main()
