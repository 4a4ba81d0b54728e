"""The host's analyses of candidate source do bounded work, whatever the source's shape: each shape below passes the
contract's size caps and made one analysis super-linear (a class lattice for the checker, a tree shaped against
both decompositions for the tree edit distance, a reordered child for the report's diff). Each test counts the
work the analysis was allowed (bases visited, table cells filled, lines aligned), never time:
``scripts/bench_host_bounds.py`` measures the times.
"""

from __future__ import annotations

import ast
import difflib
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mstar_ray import contract
from mstar_ray.contract import MAX_TREE_NODES, check_source, inspect_program
from mstar_ray.line_diff import MAX_ALIGNED_CELLS, TOO_LARGE, unified_diff
from mstar_ray.structure import nearest as nearest_module
from mstar_ray.structure import ted
from mstar_ray.structure.index import StructureIndex
from mstar_ray.structure.nearest import NearestIndex
from mstar_ray.structure.tree import program_tree
from tests.test_contract import VALID

ROOT = Path(__file__).resolve().parents[1]
SEEDS = sorted((ROOT / "seeds").glob("*.py"))


# ------------------------------------------------------------------------------------------------ the checker


def lattice(levels: int) -> str:
    """``levels`` levels of two classes, each inheriting from both of the level below: 2**levels paths."""
    classes = ["class L0a:\n    pass\n", "class L0b:\n    pass\n"]
    classes += [f"class L{i}{s}(L{i - 1}a, L{i - 1}b):\n    pass\n" for i in range(1, levels) for s in "ab"]
    return VALID.replace("class KnowledgeBase:", "\n".join(classes) + f"\nclass KnowledgeBase(L{levels - 1}a, "
                         f"L{levels - 1}b):", 1)


@pytest.mark.parametrize("levels", [10, 60, 400])
def test_the_checker_resolves_a_class_lattice_in_work_linear_in_its_edges(levels: int):
    source = lattice(levels)
    tree = ast.parse(source)
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    visits = [0]
    methods = contract._methods_with_local_bases(classes["KnowledgeBase"], classes, visits)
    edges = sum(len(c.bases) for c in classes.values())
    assert visits[0] <= 2 * edges  # each class looks at its bases at most twice; 2**levels paths are never walked
    assert {"write", "read"} <= set(methods)
    assert check_source(source) == [] or levels == 400  # 400 levels is past the tree's node cap: a size violation


def test_inherited_methods_resolve_as_before_through_a_lattice_and_a_cycle():
    source = VALID.replace("class KnowledgeBase:", "class Base:\n    def feedback(self, query, score):\n        pass\n\n"
                           "class Left(Base):\n    pass\n\nclass Right(Base, Left):\n    pass\n\n"
                           "class KnowledgeBase(Left, Right):", 1)
    assert inspect_program(source).has_feedback
    tree = ast.parse("class A(B):\n    def read(self, q): pass\nclass B(A):\n    def write(self, i, t): pass\n")
    classes = {c.name: c for c in tree.body}
    assert set(contract._methods_with_local_bases(classes["A"], classes)) == {"read", "write"}


def test_the_hostile_lattice_is_ok_for_mstar_ray_check():
    done = subprocess.run([sys.executable, "-m", "mstar_ray.cli", "check", str(ROOT / "tests/hostile/class_lattice.py")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


# ------------------------------------------------------------------------------------------------ the tree distance


def shaped_against_the_distance(depth: int, width: int, name: str = "x") -> str:
    """A list of ``width`` names wrapped ``depth`` times as the middle argument of a call: the big subtree is
    neither a first nor a last child at any level, so both of Zhang-Shasha's decompositions pay for it at each."""
    expression = "[" + ", ".join(f"{name}{i}" for i in range(width)) + "]"
    for _ in range(depth):
        expression = f"f(a, {expression}, b)"
    return VALID + f"\nSHAPE = {expression}\n"


def test_a_tree_shaped_against_the_distance_passes_the_contract_and_fills_no_table():
    source = shaped_against_the_distance(44, 3000)
    assert check_source(source) == []
    tree, other = program_tree(source, "names"), program_tree(shaped_against_the_distance(44, 3000, "y"), "names")
    assert ted.distance_cells(tree, other) > 100 * ted.MAX_DISTANCE_CELLS  # what the exact distance would fill
    distance, cells = ted.distance_with_cells(tree, other)
    assert cells == 0 and distance == ted.label_bound(tree, other) > 0


def test_below_the_cap_the_distance_is_exact_and_the_label_bound_never_exceeds_it():
    trees = [program_tree(path.read_text(), "names") for path in SEEDS[:5]]
    for a in trees:
        for b in trees:
            distance, cells = ted.distance_with_cells(a, b)
            assert 0 < cells <= ted.MAX_DISTANCE_CELLS and cells == ted.distance_cells(a, b)
            assert ted.label_bound(a, b) <= distance == ted.tree_distance(b, a)


def test_placing_a_program_among_many_fills_at_most_the_search_budget(monkeypatch: pytest.MonkeyPatch):
    """At caps scaled down to seed size: a hundred known programs with the same labels in other orders (the
    label bound spares none of them), and one more placed among them."""
    seed = SEEDS[0].read_text()
    functions = [f"def step{i}(x):\n    return x + {i}\n" for i in range(12)]
    rng = random.Random(3)
    known = []
    for _ in range(100):
        rng.shuffle(functions)
        known.append(seed + "\n" + "\n".join(functions))
    trees = [program_tree(source, "names") for source in known]
    pair = ted.distance_cells(trees[0], trees[1])
    monkeypatch.setattr(ted, "MAX_DISTANCE_CELLS", 2 * pair)
    monkeypatch.setattr(nearest_module, "MAX_NEAREST_CELLS", 5 * pair)
    index = NearestIndex()
    for tree in trees[1:]:
        index.add(tree)
    found = index.nearest(trees[0])
    assert index.cut_short == 1 and index.computed <= 7  # without the budget: 99 exact distances
    assert index.cells <= 5 * pair + 2 * pair  # the budget, overrun by at most one pair at its cap
    assert found is not None and 0.0 <= found


def test_the_structure_index_reads_no_tree_past_the_checkers_caps():
    too_large = VALID + "\nX = [" + ", ".join(["1"] * MAX_TREE_NODES) + "]\n"
    index = StructureIndex()
    placement = index.place(too_large, None)
    assert placement.key is None and placement.to_population is None  # evaluated, with no key or novelty


# ------------------------------------------------------------------------------------------------ the report's diff


def applied(before: str, lines: list[str]) -> list[str]:
    """A unified diff applied to ``before``: the diff is right if this gives the after side back."""
    a, out, at = before.splitlines(), [], 0
    for line in lines:
        if line.startswith(("---", "+++")) or line == TOO_LARGE:
            continue
        if line.startswith("@@"):
            start, length = re.match(r"@@ -(\d+)(?:,(\d+))? \+", line).groups()
            start = int(start) - (1 if length != "0" else 0)
            out += a[at:start]
            at = start
        elif line[0] == "+":
            out.append(line[1:])
        else:
            assert a[at] == line[1:]
            if line[0] == " ":
                out.append(line[1:])
            at += 1
    return out + a[at:]


def test_a_pathological_child_is_shown_whole_without_aligning_it():
    """Each parent line kept, a new line after each: difflib's matcher is quadratic in the lines here (5 s at
    4,000 lines on this machine); the bounded diff aligns nothing and still gives the child back."""
    parent = [f"x{i} = {i}" for i in range(14_000)]
    child = [line for i, kept in enumerate(parent) for line in (kept, f"z{i} = {i}")]
    diff = unified_diff("\n".join(parent), "\n".join(child), "parent.py", "child.py")
    assert not diff.aligned and diff.aligned_cells == 0 and TOO_LARGE in diff.lines
    assert applied("\n".join(parent), diff.lines) == child


@pytest.mark.parametrize("lines", [990, 1000])
def test_at_the_cap_the_matcher_gets_at_most_its_cells(lines: int):
    parent = [f"x{i} = {i}" for i in range(lines)]
    child = [f"y{i} = {i}" if i % 2 else line for i, line in enumerate(parent)]
    diff = unified_diff("\n".join(parent), "\n".join(child), "a", "b")
    assert diff.aligned_cells <= MAX_ALIGNED_CELLS and diff.aligned
    assert applied("\n".join(parent), diff.lines) == child


def test_the_diff_of_ordinary_edits_is_difflibs_own_renumbered_and_right():
    rng = random.Random(5)
    sources = [path.read_text() for path in SEEDS]
    for before in sources:
        lines = before.splitlines()
        for k in range(30):
            edited = list(lines)
            at = rng.randrange(len(edited))
            edited[at:at + rng.randrange(4)] = [f"changed = {k}"] * rng.randrange(3)
            after = "\n".join(edited)
            diff = unified_diff(before, after, "a", "b")
            assert diff.aligned and applied(before, diff.lines) == edited
            plain = list(difflib.unified_diff(lines, edited, "a", "b", lineterm=""))
            assert sum(line[0] in "+-" for line in diff.lines) == sum(line[0] in "+-" for line in plain)
