"""Program source to labelled tree: what each abstraction level keeps, what is never structure, and
the postorder arrays the distance code reads."""

from __future__ import annotations

import numpy as np
import pytest

from mstar_ray.structure.tree import LEVELS, Tree, program_tree, structural_key
from tests.conftest import seed_source

SEED = seed_source("experience_learner")


def same(a: Tree, b: Tree) -> bool:
    return np.array_equal(a.labels, b.labels) and np.array_equal(a.sizes, b.sizes)


def test_formatting_comments_docstrings_and_commit_message_are_not_structure():
    variant = (
        SEED.replace('"""Seed: Experience Learner.', '"""Another module docstring entirely.')
        .replace("    def write(self, item: KnowledgeItem, raw_text: str) -> None:\n",
                 "    def write(self, item: KnowledgeItem, raw_text: str) -> None:\n"
                 '        """Store the lesson once and the fact always."""  \n\n')
        .replace("MAX_CONTEXT_CHARS = 3000", "MAX_CONTEXT_CHARS = (3000)  # characters")
        .replace('COMMIT_MESSAGE = "Seed: keep', 'COMMIT_MESSAGE = "Child: keep')
        .replace("self.facts = []", "self.facts = [\n        ]")
    )
    assert variant != SEED
    assert structural_key(variant) == structural_key(SEED)
    for level in LEVELS:
        assert same(program_tree(variant, level), program_tree(SEED, level))


def test_commit_message_is_dropped_entirely():
    without = SEED.replace('COMMIT_MESSAGE = "Seed: keep lists of lessons and facts; read returns them, most related first."\n', "")
    assert without != SEED
    for level in LEVELS:
        assert same(program_tree(without, level), program_tree(SEED, level))


def test_instructions_are_exact_structure_but_only_literals():
    variant = SEED.replace('"Name what the question is about."', '"Name the topic of the question."')
    assert variant != SEED
    assert structural_key(variant) != structural_key(SEED)
    assert not same(program_tree(variant, "exact"), program_tree(SEED, "exact"))
    assert same(program_tree(variant, "names"), program_tree(SEED, "names"))
    assert same(program_tree(variant, "shape"), program_tree(SEED, "shape"))


def test_a_string_statement_that_is_not_first_is_kept():
    plain = "def f(x):\n    y = x\n    return y\n"
    noted = "def f(x):\n    y = x\n    'not a docstring'\n    return y\n"
    assert structural_key(plain) != structural_key(noted)
    assert program_tree(noted).size == program_tree(plain).size + 2  # Expr and its Constant


def test_levels_abstract_numbers_then_identifiers():
    base = program_tree("def f(x):\n    return x + 1\n", "exact")
    number = "def f(x):\n    return x + 2\n"
    renamed = "def g(y):\n    return y + 2\n"
    assert not same(program_tree(number, "exact"), base)
    assert same(program_tree(number, "names"), program_tree("def f(x):\n    return x + 1\n", "names"))
    assert not same(program_tree(renamed, "names"), program_tree(number, "names"))
    assert same(program_tree(renamed, "shape"), program_tree(number, "shape"))
    # literal kinds stay at the names level: a string is not a number
    assert not same(program_tree("x = 'a'\n", "names"), program_tree("x = 1\n", "names"))


def test_operators_and_branches_are_structure_at_every_level():
    for level in LEVELS:
        assert not same(program_tree("y = a + b\n", level), program_tree("y = a - b\n", level))
        in_body = "if a:\n    x = 1\n    y = 2\n"
        in_else = "if a:\n    x = 1\nelse:\n    y = 2\n"
        assert not same(program_tree(in_body, level), program_tree(in_else, level))


def test_noise_nodes_are_dropped():
    # Module, Assign, Name, Constant: no Store context
    assert program_tree("x = 1\n").size == 4
    # Module, Expr, BinOp(Add), Name, Name: no Load contexts, the operator is in BinOp's label
    assert program_tree("a + b\n").size == 5


def test_postorder_arrays_describe_the_tree():
    tree = program_tree("def f(a, b):\n    return g(a, b=b)\n")
    assert tree.size == len(tree.sizes) == len(tree.mirror_labels) == len(tree.mirror_sizes)
    assert tree.sizes[-1] == tree.size and tree.mirror_sizes[-1] == tree.size
    # every subtree ends at its root and starts at a leaf
    leftmost = np.arange(tree.size) - tree.sizes + 1
    assert np.all(leftmost >= 0) and np.all(tree.sizes[leftmost] == 1)
    # the mirror is the same nodes in another order, and differs here (g's arguments are ordered)
    assert sorted(tree.mirror_labels.tolist()) == sorted(tree.labels.tolist())
    assert not np.array_equal(tree.mirror_labels, tree.labels)
    assert tree.labels.dtype == np.int64 and tree.sizes.dtype == np.int32


@pytest.mark.parametrize("name", ["experience_learner", "llm_summarizer", "vector_search"])
def test_seeds_make_trees_of_a_few_hundred_nodes(name):
    tree = program_tree(seed_source(name))
    assert 150 <= tree.size <= 400
    assert len(structural_key(seed_source(name))) == 16


def test_a_source_that_does_not_parse_names_the_line():
    with pytest.raises(ValueError, match="line 3"):
        program_tree("x = 1\ny = 2\ndef broken(:\n")
    with pytest.raises(ValueError, match="line 2"):
        structural_key("x = 1\n  y = 2\n")


def test_an_unknown_level_is_refused():
    with pytest.raises(ValueError, match="level"):
        program_tree("x = 1\n", "tokens")  # type: ignore[arg-type]
