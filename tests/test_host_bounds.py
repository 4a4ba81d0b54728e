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

import numpy as np
import pytest

from mstar_ray import contract
from mstar_ray.contract import MAX_TREE_NODES, check_source, inspect_program
from mstar_ray.line_diff import MAX_ALIGNED_CELLS, MAX_MATCH_STEPS, TOO_LARGE, align, unified_diff
from mstar_ray.reflect import v4a
from mstar_ray.structure import nearest as nearest_module
from mstar_ray.structure import ted
from mstar_ray.structure.index import StructureIndex
from mstar_ray.structure.nearest import NearestIndex
from mstar_ray.structure.tree import program_tree
from tests.test_contract import VALID
from tests.work_count import lines_run

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
    assert index.cells <= 5 * pair  # the budget: a pair that would pass it is not computed
    assert found is not None and 0.0 <= found


def same_labels_other_orders(programs: int, functions: int, seed: int = 3) -> list[str]:
    """A seed with ``functions`` small functions appended, in ``programs`` different orders: the label bound spares
    none of them, so each pair's distance is computed exactly, and each pair fills the same table."""
    base = SEEDS[0].read_text()
    parts = [f"def step{i}(x):\n    return x + {i}\n" for i in range(functions)]
    rng = random.Random(seed)
    known = []
    for _ in range(programs):
        rng.shuffle(parts)
        known.append(base + "\n" + "\n".join(parts))
    return known


def test_placing_a_child_among_many_fills_at_most_the_placement_budget(monkeypatch: pytest.MonkeyPatch):
    """The driver's loop places each child: its distances to its parent and to the nearest known programs fill at
    most ``MAX_PLACE_CELLS`` in all (at caps scaled to seed size, a child with forty equally far programs)."""
    from mstar_ray.structure import index as index_module

    known = same_labels_other_orders(41, 12)
    trees = [program_tree(source, "names") for source in known]
    pair = ted.distance_cells(trees[0], trees[1])
    monkeypatch.setattr(ted, "MAX_DISTANCE_CELLS", 2 * pair)
    monkeypatch.setattr(index_module, "MAX_PLACE_CELLS", 4 * pair)
    index = StructureIndex()
    for k, source in enumerate(known[1:]):
        index.learn(f"p{k}", source)
    placement = index.place(known[0], "p0")
    assert placement.to_parent is not None and placement.to_population is not None
    assert 0 < placement.cells <= 4 * pair  # the parent's pair and at most three more (unbounded: 40)


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


def one_line_repeated(lines: int) -> tuple[str, str]:
    """A parent of one comment line repeated (within the contract's size cap as a program's padding), and a child
    changing the middle one: every short block of it occurs at the top first, so a patch hunk needs context."""
    parent = ["#"] * lines
    child = list(parent)
    child[lines // 2] = "X = 1"
    return "\n".join(parent) + "\n", "\n".join(child) + "\n"


def against_the_matcher(lines: int) -> tuple[str, str]:
    """One line repeated in the parent, and in the child each kept once with a new one after it: each of difflib's
    longest-match searches visits every pair of the repeated line, and it makes one per line (cubic)."""
    parent = ["# p"] + ["#"] * (lines - 2) + ["# q"]
    child = ["# r"] + ["#", "# z"] * ((lines - 2) // 2) + ["# s"]
    return "\n".join(parent) + "\n", "\n".join(child) + "\n"


def test_the_matcher_stops_at_its_budget_and_the_change_is_shown_whole():
    parent, child = against_the_matcher(1000)
    found = align(parent.splitlines(), child.splitlines(), autojunk=False)  # as make_patch aligns
    assert not found.aligned and 0 < found.steps <= MAX_MATCH_STEPS  # difflib alone: about 40 s here
    # the report's diff lets difflib drop lines repeated past 1% of the child: a hundred lines repeated below that
    parent = "\n".join(["# p"] + [f"#{i % 100}" for i in range(998)] + ["# q"])
    child = "\n".join(["# r"] + [line for i in range(499) for line in (f"#{i % 100}", f"# z{i}")] + ["# s"])
    diff = unified_diff(parent, child, "a", "b")
    assert not diff.aligned and 0 < diff.steps <= MAX_MATCH_STEPS and TOO_LARGE in diff.lines
    assert applied(parent, diff.lines) == child.splitlines()


def test_make_patch_of_a_repetitive_program_runs_in_linear_work():
    """Before: each leading-context length tried searched the program from the top (1,000 lines: 8.0e6 lines run;
    4,000: 1.3e8, quadratic). Now a few lengths, each searching only up to the hunk, in linear time."""
    runs = []
    for lines in (1000, 8000):
        parent, child = one_line_repeated(lines)
        runs.append(lines_run(lambda: v4a.make_patch(parent, child)))
        assert v4a.apply_patch(parent, v4a.make_patch(parent, child)).source == child
    assert runs[1] < 10 * runs[0]  # linear: 8x; the old search 64x


def test_make_patch_past_the_matchers_budget_is_one_hunk_that_applies():
    """Before: 150 lines ran 2.6e6 Python lines, 600 ran 1.7e8 (cubic). Now both sizes past the budget do the same
    bounded alignment and linear work beside it."""
    runs = []
    for lines in (600, 2400):
        parent, child = against_the_matcher(lines)
        runs.append(lines_run(lambda: v4a.make_patch(parent, child)))
        assert v4a.apply_patch(parent, v4a.make_patch(parent, child)).source == child
    assert runs[1] < 4 * runs[0]  # 4x the lines: linear would be 4x, the unbounded matcher 64x


def test_the_linear_block_search_finds_what_a_scan_finds():
    """``v4a._find_block`` against the plain scan it replaced, on short programs that repeat lines (where a
    Knuth-Morris-Pratt search has to fall back), at each fuzz level, with and without End of File."""
    rng = random.Random(11)

    def scanned(lines, block, start, eof):
        last = len(lines) - len(block)
        for positions in ([last] if eof and last >= start else [], range(start, last + 1)):
            for level, norm in enumerate(v4a._LEVELS):
                target = [norm(line) for line in block]
                for pos in positions:
                    if all(norm(lines[pos + i]) == want for i, want in enumerate(target)):
                        return pos, level
        return None

    alphabet = ["a", "a ", " a", "b", "ab"]
    for _ in range(3000):
        lines = [rng.choice(alphabet) for _ in range(rng.randrange(12))]
        block = [rng.choice(alphabet) for _ in range(1 + rng.randrange(4))]
        if rng.random() < 0.5 and len(lines) > 3:
            at = rng.randrange(len(lines) - 2)
            block = lines[at:at + rng.randrange(1, 4)]
        start, eof = rng.randrange(len(lines) + 1), rng.random() < 0.3
        assert v4a._find_block(lines, block, start, eof) == scanned(lines, block, start, eof), (lines, block, start)


# ------------------------------------------------------------------------------------------------ crossover


def chained_methods(methods: int) -> tuple[str, str]:
    """A receiver and a donor with the same methods, the donor's ``read`` needing ``s0``'s attribute, ``s0`` needing
    ``s1``'s, and so on, the last needing one nothing sets: every method unit grows one method a round (a walk of
    the class each) and fails at the end, and every method is a plan."""
    receiver = VALID + "".join(f"\n    def s{k}(self):\n        self.c{k} = 1\n" for k in range(methods))
    donor = VALID.replace('return ""', "return str(self.a0)") + "".join(
        f"\n    def s{k}(self):\n        self.a{k} = self.a{k + 1}\n" for k in range(methods))
    return receiver, donor


def test_crossover_of_a_chain_of_methods_does_linear_work():
    """Before: 50 methods took 8 s here, 200 four minutes (cubic: plans x rounds x a walk of the class). Now at
    most ``MAX_PLANS`` plans of at most ``MAX_UNIT_METHODS`` rounds each."""
    from mstar_ray.reflect.offline import NoMutation
    from mstar_ray.reflect.offline.crossover import MAX_PLANS, MAX_UNIT_METHODS, crossover

    assert MAX_PLANS < 25 and MAX_UNIT_METHODS < 25  # both sizes below are past the caps
    runs = []
    for methods in (25, 100):
        receiver, donor = chained_methods(methods)
        assert check_source(receiver) == [] and check_source(donor) == []

        def cross() -> None:
            with pytest.raises(NoMutation):
                crossover(receiver, donor, random.Random(0))

        runs.append(lines_run(cross))
    assert runs[1] < 6 * runs[0]  # 4x the methods: linear 4x (the class is walked a bounded number of times)


# ------------------------------------------------------------------------------------------------ the map's matrix


def test_the_population_matrix_fills_at_most_its_budget_and_bounds_the_rest(monkeypatch: pytest.MonkeyPatch):
    """At caps scaled to seed size: ten programs equally far apart, a matrix budget of three exact distances. The
    other pairs read a lower bound, and each exact distance is computed once (counted)."""
    from mstar_ray.structure import matrix

    known = same_labels_other_orders(10, 12)
    trees = [program_tree(source, "names") for source in known]
    pair = ted.distance_cells(trees[0], trees[1])
    monkeypatch.setattr(ted, "MAX_DISTANCE_CELLS", 2 * pair)
    monkeypatch.setattr(matrix, "MAX_DISTANCE_CELLS", 2 * pair)
    monkeypatch.setattr(matrix, "MAX_MATRIX_CELLS", 3 * pair)
    computed = []
    exact_distance = matrix.normalised_distance
    monkeypatch.setattr(matrix, "normalised_distance", lambda a, b: computed.append(1) or exact_distance(a, b))
    exact, bounded = matrix.plan(trees, matrix.all_pairs(10))
    assert sum(ted.distance_cells(trees[i], trees[j]) for i, j in exact) <= 3 * pair and len(bounded) == 45 - len(exact)
    found = matrix.pairwise(trees)
    assert len(computed) == len(exact) <= 3  # unbounded: 45
    assert np.array_equal(found, found.T) and not found.diagonal().any()
    for i, j in bounded:
        assert 0 <= found[i, j] <= exact_distance(trees[i], trees[j])  # a lower bound


def near_lines(lines: int) -> tuple[list[str], str]:
    """Program lines much alike and a long patch line like them all: a similarity against every line, each
    quadratic in the two lengths, is what a patch error's "nearest program line" cost before."""
    return [f"x = '{'ab' * 40}{i}'" for i in range(lines)], "x = '" + "ab" * 3000 + "'"


def test_a_patch_errors_nearest_line_is_found_in_bounded_work():
    """Before: over five minutes of traced lines at 2,000 program lines (a full similarity per line); now an
    upper bound per line, linear in it, and at most ``_NEAREST_TRIED`` similarities of cut lines."""
    runs = []
    for lines in (250, 2000):
        program, text = near_lines(lines)
        runs.append(lines_run(lambda: v4a._nearest(program, text)))
        assert v4a._nearest(program, text) is not None
    assert runs[1] < 8 * runs[0]  # 8x the lines: linear at most
    assert v4a._nearest(["a = 1", "", "def read(self, query):", "b = 2"], "def reed(self, query):") == 2
