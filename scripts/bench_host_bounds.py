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
    frames(args.root)
    analyses()
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


def frames(root: str) -> None:
    """The adversarial frames of ``tests/test_sandbox_hostile_data.py`` (which counts the scan's work) timed at the
    largest frame the channel carries and at an eighth of it: linear is about 8x."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from mstar_ray.sandbox import wire
    from mstar_ray.sandbox_host.frames import ProtocolError, parse_frame
    from tests.test_sandbox_hostile_data import ADVERSARIAL_BODIES

    largest = wire.MAX_FRAME_BYTES - 100
    for shape, make in ADVERSARIAL_BODIES.items():
        times = []
        for size in (largest // 8, largest):
            body = make(size)
            started = time.perf_counter()
            try:
                parse_frame(body)
            except ProtocolError:
                pass
            times.append(time.perf_counter() - started)
        print(f"frame, {shape}: {largest // 8:,} B -> {times[0]:.4f} s; {largest:,} B -> {times[1]:.4f} s; "
              f"ratio {times[1] / max(times[0], 1e-6):.0f}x")


def analyses() -> None:
    """The host's analyses of candidate source on the shapes of ``tests/test_host_bounds.py`` (which counts their
    work), timed: the checker on a class lattice, the tree distance on a tree shaped against it, the report's diff
    of a pathological child, each beside what the unbounded analysis takes on a smaller input."""
    import difflib

    from mstar_ray.contract import check_source
    from mstar_ray.line_diff import unified_diff
    from mstar_ray.structure import ted
    from mstar_ray.structure.tree import program_tree
    from tests.test_host_bounds import lattice, shaped_against_the_distance

    def timed(step) -> float:
        started = time.perf_counter()
        step()
        return time.perf_counter() - started

    for levels in (60, 480):
        print(f"checker, class lattice of {levels} levels (2**{levels} paths): {timed(lambda: check_source(lattice(levels))):.4f} s")
    hostile = [program_tree(shaped_against_the_distance(44, 3000, name), "names") for name in "xy"]
    print(f"tree distance, shaped against it ({hostile[0].size} nodes, {ted.distance_cells(*hostile):.2e} cells "
          f"exact): {timed(lambda: ted.tree_distance(*hostile)):.4f} s (the label bound)")
    small = [program_tree(shaped_against_the_distance(12, 600, name), "names") for name in "xy"]
    ted.tree_distance(small[0], small[0])  # compiled
    print(f"  exact on a smaller one ({small[0].size} nodes, {ted.distance_cells(*small):.2e} cells): "
          f"{timed(lambda: ted.tree_distance(*small)):.4f} s")
    for n in (2000, 4000):
        parent = [f"x{i} = {i}" for i in range(n)]
        child = [line for i, kept in enumerate(parent) for line in (kept, f"z{i} = {i}")]
        bounded = timed(lambda: unified_diff("\n".join(parent), "\n".join(child), "a", "b"))
        plain = timed(lambda: list(difflib.unified_diff(parent, child, lineterm="")))
        print(f"diff, {n:,} lines each kept with a new one after it: bounded {bounded:.4f} s, difflib {plain:.4f} s")
    patches()


def patches() -> None:
    """``v4a.make_patch`` (the offline reflector's) on the shapes of ``tests/test_host_bounds.py``: a program of one
    repeated line (the leading-context search was quadratic) and a child against the matcher (difflib without
    autojunk is cubic there), each at a size and 8 times it, beside difflib's matcher alone."""
    import difflib

    from mstar_ray.reflect.v4a import make_patch
    from tests.test_host_bounds import against_the_matcher, one_line_repeated

    for name, make, sizes in (("one line repeated", one_line_repeated, (5000, 40000)),
                              ("against the matcher", against_the_matcher, (1000, 8000))):
        times = []
        for lines in sizes:
            parent, child = make(lines)
            started = time.perf_counter()
            make_patch(parent, child)
            times.append(time.perf_counter() - started)
        print(f"make_patch, {name}: {sizes[0]:,} lines {times[0]:.4f} s; {sizes[1]:,} lines {times[1]:.4f} s; "
              f"ratio {times[1] / max(times[0], 1e-6):.1f}x")
    crossovers()
    placement()
    nearest_lines()
    for lines in (250, 500):
        parent, child = (text.splitlines() for text in against_the_matcher(lines))
        started = time.perf_counter()
        list(difflib.SequenceMatcher(None, parent, child, autojunk=False).get_grouped_opcodes(3))
        print(f"  difflib's matcher alone against it, {lines:,} lines: {time.perf_counter() - started:.4f} s")



def placement() -> None:
    """``StructureIndex.place`` (in the driver's loop) of a child among programs each about as far from it as the
    tree distance's cap allows, with the same labels (the label bound spares none): its cells and its time."""
    from mstar_ray.structure import ted
    from mstar_ray.structure.index import MAX_PLACE_CELLS, StructureIndex
    from mstar_ray.structure.tree import program_tree
    from tests.test_host_bounds import same_labels_other_orders

    known = same_labels_other_orders(30, 420)
    index = StructureIndex()
    for k, source in enumerate(known[1:]):
        index.learn(f"p{k}", source)
    trees = [program_tree(source, "names") for source in known[:2]]
    ted.tree_distance(trees[0], trees[0])  # compiled
    started = time.perf_counter()
    placed = index.place(known[0], "p0")
    print(f"placement among {len(known) - 1} programs of {trees[0].size} nodes, "
          f"{ted.distance_cells(*trees):.2e} cells a pair: {placed.cells:.2e} cells filled "
          f"(cap {MAX_PLACE_CELLS:.0e}), {time.perf_counter() - started:.4f} s")


def nearest_lines() -> None:
    """A patch error's "nearest program line" (``v4a._nearest``) on lines much alike and a long patch line, beside a
    full difflib similarity against every line (what it computed before) on the smaller program."""
    import difflib

    from mstar_ray.reflect.v4a import _nearest
    from tests.test_host_bounds import near_lines

    for lines in (250, 2000):
        program, text = near_lines(lines)
        started = time.perf_counter()
        _nearest(program, text)
        print(f"nearest program line, {lines:,} lines: {time.perf_counter() - started:.4f} s")
    program, text = near_lines(250)
    started = time.perf_counter()
    max(difflib.SequenceMatcher(None, text, line).ratio() for line in program)
    print(f"  a full similarity per line, 250 lines: {time.perf_counter() - started:.4f} s")


def crossovers() -> None:
    """Crossover of a receiver and a donor whose methods form a chain (``tests/test_host_bounds.py``), at a number
    of methods and 4 times it (before the caps: 50 methods 8 s, 200 methods 4 minutes on this machine)."""
    import random

    from mstar_ray.reflect.offline import NoMutation
    from mstar_ray.reflect.offline.crossover import crossover
    from tests.test_host_bounds import chained_methods

    times = []
    for methods in (100, 400):
        receiver, donor = chained_methods(methods)
        started = time.perf_counter()
        try:
            crossover(receiver, donor, random.Random(0))
        except NoMutation:
            pass
        times.append(time.perf_counter() - started)
    print(f"crossover, a chain of methods: 100 -> {times[0]:.4f} s; 400 -> {times[1]:.4f} s; "
          f"ratio {times[1] / max(times[0], 1e-6):.1f}x")


if __name__ == "__main__":
    main()
