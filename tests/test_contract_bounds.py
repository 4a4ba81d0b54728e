"""Bounds on what a program declares, checked statically: the whole source, the syntax tree's size and depth,
each field description, the commit message, the number of fields, and the declared part of each task-agent
prompt (capped like the program's own toolkit prompts). The checker reports a violation, and never raises, on
any input: hostile ones (a union repeated a thousand times, deep nesting, null bytes, huge files) and random
garbage. Every seed of the library passes, unchanged."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from mstar_ray import contract
from mstar_ray.contract import check_source
from mstar_ray.seeds import LIBRARY
from tests.test_contract import VALID


def codes(source: str) -> set[str]:
    return {v.code for v in check_source(source)}


def with_query_field(annotation: str) -> str:
    return VALID.replace("class Query:\n", f"class Query:\n    extra: {annotation} = None\n", 1)


HOSTILE_SHAPES = {
    "a union repeated 1,000 times": with_query_field(" | ".join(["str"] * 1000)),
    "the same union in a string annotation": with_query_field(repr(" | ".join(["str"] * 1000))),
    "Optional nested 500 deep": with_query_field("Optional[" * 500 + "str" + "]" * 500),
    "an attribute chain of 5,000": VALID + "\nX = a" + ".b" * 5000 + "\n",
    "5,000 calls in a row": VALID + "\nX = f" + "()" * 5000 + "\n",
    "lists nested 1,000 deep": VALID + "\nX = " + "[" * 1000 + "]" * 1000 + "\n",
    "a sum of 100,000 terms": VALID + "\nX = " + " + ".join(["1"] * 20_000) + "\n",
    "ifs nested 150 deep": VALID + "\n" + "".join(" " * i + "if x:\n" for i in range(150)) + " " * 150 + "pass\n",
    "null bytes": VALID + "\x00",
    "a 5,000-digit integer": VALID + "\nX = " + "9" * 5000 + "\n",
    "a file of 10 MB": VALID + "#" + "x" * 10_000_000,
    "a lone surrogate": VALID + "\nX = '\ud800'\n",
}


@pytest.mark.parametrize("shape", list(HOSTILE_SHAPES))
def test_the_checker_reports_and_never_raises_on_hostile_shapes(shape):
    violations = check_source(HOSTILE_SHAPES[shape])
    assert all(isinstance(v, contract.Violation) and len(v.message) < 1000 for v in violations)
    if shape != "a lone surrogate":  # valid Python: a program may hold one; the frames it sends may not
        assert violations, shape


def test_the_union_repeated_a_thousand_times_is_a_size_violation():
    assert codes(HOSTILE_SHAPES["a union repeated 1,000 times"]) == {"size"}


def test_the_checker_never_raises_on_random_garbage():
    rng = random.Random(27)
    alphabet = list("()[]{}:;,.'\"\\|=+-*/%@#\n\t abcdefxyz0123456789") + ["def ", "class ", "lambda", "if ", "\ud800"]
    for _ in range(1500):
        source = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        check_source(source)  # returns a list, whatever the input
        check_source(VALID + "\n" + source)


def test_the_whole_source_is_bounded():
    assert codes(VALID + "#" + "x" * contract.MAX_SOURCE_CHARS) == {"size"}
    assert not check_source(VALID + "#" + "x" * (contract.MAX_SOURCE_CHARS - len(VALID) - 10))


def test_the_syntax_tree_is_bounded_in_nodes_and_depth():
    many = VALID + "\n" + "\n".join(f"V{i} = {i}" for i in range(contract.MAX_TREE_NODES // 3))
    assert "size" in codes(many)
    deep = VALID + "\nX = " + "-" * (contract.MAX_TREE_DEPTH + 5) + "1\n"
    assert "size" in codes(deep)


def test_each_description_and_the_commit_message_are_bounded():
    long = "d" * (contract.MAX_DESCRIPTION_CHARS + 1)
    described = VALID.replace('"what was said"', repr(long))
    assert [v.message for v in check_source(described)] == [
        f"the description of KnowledgeItem.text has {len(long):,} characters; at most "
        f"{contract.MAX_DESCRIPTION_CHARS:,} allowed"]
    message = VALID + f"\nCOMMIT_MESSAGE = {'m' * 2001!r}\n"
    assert codes(message) == {"size"}


def test_the_number_of_fields_is_bounded():
    fields = "".join(f"    f{i}: str = ''\n" for i in range(contract.MAX_FIELDS + 1))
    assert codes(VALID.replace("class Query:\n", "class Query:\n" + fields, 1)) == {"size"}


@pytest.mark.parametrize("constant, prompt", [("ALWAYS_ON_KNOWLEDGE", "answer"), ("INSTRUCTION_RESPONSE", "answer"),
                                              ("INSTRUCTION_QUERY", "query"), ("INSTRUCTION_KNOWLEDGE_ITEM", "extraction")])
def test_the_declared_part_of_each_prompt_is_capped_like_a_toolkit_prompt(constant, prompt):
    text = "glossary entry. " * (contract.DECLARED_PROMPT_MAX_CHARS // 16 + 1)
    source = VALID.replace(f'{constant} = "', f'{constant} = "{text}', 1) if f'{constant} = "' in VALID else None
    assert source is not None
    violations = check_source(source)
    assert [v.code for v in violations] == ["prompt-size"]
    assert f"every {prompt} prompt" in violations[0].message and "32,000" in violations[0].message


def test_descriptions_count_towards_their_prompt():
    description = "x" * (contract.MAX_DESCRIPTION_CHARS - 10)
    fields = "".join(f'    f{i}: str = field(default="", metadata={{"description": "{description}"}})\n'
                     for i in range(contract.DECLARED_PROMPT_MAX_CHARS // contract.MAX_DESCRIPTION_CHARS + 1))
    source = VALID.replace("class KnowledgeItem:\n", "class KnowledgeItem:\n" + fields, 1)
    assert codes(source) == {"prompt-size"}


def test_every_seed_passes_within_the_bounds():
    for entry in LIBRARY:
        assert check_source(entry.path.read_text()) == [], entry.name


def test_mstar_ray_check_reports_a_hostile_shape_with_exit_1(tmp_path: Path):
    path = tmp_path / "union.py"
    path.write_text(HOSTILE_SHAPES["a union repeated 1,000 times"])
    done = subprocess.run([sys.executable, "-m", "mstar_ray.cli", "check", str(path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    assert "[size]" in done.stdout + done.stderr and "Traceback" not in done.stderr
