"""The offline reflector's mutations: valid, small, deterministic, consistent, honouring the switches."""

from __future__ import annotations

import ast
import difflib
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.contract import REQUIRED_CONSTANTS, check_source, inspect_program
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.reflect.offline import (
    GUIDANCE,
    READ_LIMIT,
    Mutation,
    NoMutation,
    crossover,
    edit_instruction,
    filter_writes,
    order_by_recency,
    perturb_numbers,
    propose,
)
from mstar_ray.seeds import PAPER_SEEDS
from mstar_ray.families.task_registry import load_task

ROOT = Path(__file__).resolve().parent.parent
# The paper's three seeds, whose shapes these expectations describe; the whole library goes through propose()
# in tests/test_seed_library.py.
SEEDS = {name: (ROOT / "seeds" / f"{name}.py").read_text() for name in sorted(PAPER_SEEDS)}
SINGLE_KINDS = {
    "perturb_numbers": perturb_numbers,
    "edit_instruction": edit_instruction,
    "filter_writes": filter_writes,
    "order_by_recency": order_by_recency,
}

# Nothing to tune, no order to flip, a write() that stores nothing: only instruction edits apply.
MINIMAL = '''from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = "Note the text."
INSTRUCTION_QUERY = "Ask."
INSTRUCTION_RESPONSE = "Answer."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str


class KnowledgeBase:
    def __init__(self, toolkit):
        pass

    def write(self, item, raw_text):
        pass

    def read(self, query):
        return ""
'''


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """(removed lines, added lines) between two sources."""
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    body = [line for line in diff if not line.startswith(("---", "+++", "@@"))]
    return [line[1:] for line in body if line.startswith("-")], [line[1:] for line in body if line.startswith("+")]


def assert_valid_child(parent: str, mutation: Mutation) -> None:
    assert mutation.source != parent
    assert check_source(mutation.source) == []
    compile(mutation.source, "program.py", "exec")
    assert mutation.description


# --------------------------------------------------------------------------------------------------
# every kind, on every seed
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed_name", sorted(SEEDS))
@pytest.mark.parametrize("kind", sorted(SINGLE_KINDS))
def test_each_kind_on_each_seed_gives_a_valid_different_program(seed_name: str, kind: str) -> None:
    source = SEEDS[seed_name]
    if (seed_name, kind) == ("vector_search", "order_by_recency"):
        # Chroma returns by similarity; there is no insertion order, ORDER BY or sorted() to flip.
        with pytest.raises(NoMutation):
            order_by_recency(source, random.Random(0))
        return
    for rng_seed in range(5):
        mutation = SINGLE_KINDS[kind](source, random.Random(rng_seed))
        assert mutation.kind == kind
        assert_valid_child(source, mutation)


@pytest.mark.parametrize("receiver", sorted(SEEDS))
@pytest.mark.parametrize("donor", sorted(SEEDS))
def test_crossover_between_seeds_gives_a_valid_different_program(receiver: str, donor: str) -> None:
    if receiver == donor:
        with pytest.raises(NoMutation):
            crossover(SEEDS[receiver], SEEDS[donor], random.Random(0))
        return
    for rng_seed in range(4):
        mutation = crossover(SEEDS[receiver], SEEDS[donor], random.Random(rng_seed))
        assert mutation.kind == "crossover"
        assert "crossover" in mutation.description
        assert_valid_child(SEEDS[receiver], mutation)


# --------------------------------------------------------------------------------------------------
# small diffs
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed_name", sorted(SEEDS))
def test_perturb_changes_one_number_on_one_line(seed_name: str) -> None:
    source = SEEDS[seed_name]
    for rng_seed in range(10):
        mutation = perturb_numbers(source, random.Random(rng_seed))
        removed, added = changed_lines(source, mutation.source)
        assert len(removed) == len(added) == 1
        old_tokens, new_tokens = removed[0].split(), added[0].split()
        assert len(old_tokens) == len(new_tokens)
        differing = [(a, b) for a, b in zip(old_tokens, new_tokens) if a != b]
        assert len(differing) == 1, differing
        assert mutation.description.startswith(("raise ", "lower "))


def test_perturb_keeps_read_limits_within_the_contract_and_leaves_non_tunables_alone() -> None:
    program = SEEDS["vector_search"].replace(
        "MAX_CONTEXT_CHARS = 3000",
        'MAX_CONTEXT_CHARS = 3000\nVERBOSE = True\nLABEL = "top 5"',
    )
    for rng_seed in range(60):
        child = perturb_numbers(program, random.Random(rng_seed)).source
        values = {
            stmt.targets[0].id: stmt.value.value
            for stmt in ast.parse(child).body
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)
        }
        assert values["MAX_CONTEXT_CHARS"] <= READ_LIMIT
        assert values["VERBOSE"] is True and values["LABEL"] == "top 5"
        assert values["TOP_K"] >= 1 and isinstance(values["TOP_K"], int)
        # Indices like documents[0] are never touched.
        assert 'found["documents"][0]' in child


def test_perturb_reaches_int_literals_in_code() -> None:
    source = SEEDS["experience_learner"]  # lessons sorted(...)[:5] in read()
    descriptions = {perturb_numbers(source, random.Random(i)).description for i in range(40)}
    assert any("slice bound in read()" in d for d in descriptions)


@pytest.mark.parametrize("seed_name", sorted(SEEDS))
def test_instruction_edit_rewrites_one_constant_by_one_sentence(seed_name: str) -> None:
    source = SEEDS[seed_name]
    before = inspect_program(source).constants
    for rng_seed in range(10):
        mutation = edit_instruction(source, random.Random(rng_seed))
        after = inspect_program(mutation.source).constants
        changed = [name for name in REQUIRED_CONSTANTS if before[name] != after[name]]
        assert len(changed) == 1
        name = changed[0]
        assert mutation.description.startswith(f"reword {name}: ")
        old, new = before[name], after[name]
        added_text = new.replace(old.rstrip(), "", 1).strip() if len(new) > len(old) else ""
        assert added_text in GUIDANCE[name] or len(new) < len(old)
        removed, added = changed_lines(source, mutation.source)
        assert len(removed) <= 4 and len(added) <= 5
        # Nothing but that constant's statement moved.
        outside = [line for line in removed + added if line and not line.startswith((" ", name, ")"))]
        assert outside == []


@pytest.mark.parametrize("seed_name", sorted(SEEDS))
def test_write_filter_only_adds_a_few_lines(seed_name: str) -> None:
    source = SEEDS[seed_name]
    descriptions = set()
    for rng_seed in range(6):
        mutation = filter_writes(source, random.Random(rng_seed))
        removed, added = changed_lines(source, mutation.source)
        assert removed == [] and 4 <= len(added) <= 7
        descriptions.add(mutation.description.split(" (")[0])
    assert len(descriptions) == 2  # both filters are reachable


def test_write_filters_stack_and_are_added_once_each() -> None:
    source = filter_writes(SEEDS["vector_search"], random.Random(0)).source
    source = filter_writes(source, random.Random(0)).source
    assert "_stored_texts" in source and "MIN_WRITE_WORDS" in source
    with pytest.raises(NoMutation):
        filter_writes(source, random.Random(0))


@pytest.mark.parametrize("seed_name", ["experience_learner", "llm_summarizer"])
def test_recency_flip_changes_one_line_and_flips_back(seed_name: str) -> None:
    source = SEEDS[seed_name]
    for rng_seed in range(6):
        mutation = order_by_recency(source, random.Random(rng_seed))
        removed, added = changed_lines(source, mutation.source)
        assert len(removed) == len(added) == 1
        assert "newest first" in mutation.description
    flipped = order_by_recency(source, random.Random(0))
    back = [order_by_recency(flipped.source, random.Random(i)) for i in range(20)]
    assert any(m.source == source for m in back), "each flip can be undone"


# --------------------------------------------------------------------------------------------------
# crossover consistency and what it carries
# --------------------------------------------------------------------------------------------------


def module_names(source: str) -> set[str]:
    names = set()
    for stmt in ast.parse(source).body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            names |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return names


def test_crossover_carries_the_constants_and_helpers_the_taken_code_needs() -> None:
    receiver, donor = SEEDS["experience_learner"], SEEDS["vector_search"]
    for rng_seed in range(4):
        mutation = crossover(receiver, donor, random.Random(rng_seed))
        if "KnowledgeBase" in mutation.description or "read()" in mutation.description:
            break
    names = module_names(mutation.source)
    assert {"CHUNK_CHARS", "TOP_K", "chunk"} <= names
    assert "carry over" in mutation.description
    # The donor's read() uses query.query: the receiver's Query came along.
    assert "query: str" in mutation.source


def test_crossover_carries_imports_and_new_constants_of_a_relative() -> None:
    receiver = SEEDS["vector_search"]
    donor = receiver.replace(
        '        docs = found["documents"][0]\n',
        '        docs = heapq.nsmallest(RERANK_KEEP, found["documents"][0], key=len)\n',
    ).replace("from dataclasses import dataclass, field\n", "import heapq\nfrom dataclasses import dataclass, field\n").replace(
        "TOP_K = 5\n", "TOP_K = 5\n# Keep the shortest of the retrieved chunks.\nRERANK_KEEP = 3\n"
    )
    mutation = crossover(receiver, donor, random.Random(0))
    assert mutation.description.startswith("take read() from parent #")
    assert "import heapq" in mutation.source and "RERANK_KEEP = 3" in mutation.source
    assert "# Keep the shortest of the retrieved chunks." in mutation.source
    removed, added = changed_lines(receiver, mutation.source)
    assert len(removed) == 1 and len(added) == 4


def test_crossover_within_a_lineage_takes_the_methods_that_share_storage() -> None:
    base = SEEDS["experience_learner"]
    deduping = next(
        m.source for i in range(10) if "repeated" in (m := filter_writes(base, random.Random(i))).description
    )
    sibling = order_by_recency(base, random.Random(1)).source
    seen = set()
    for rng_seed in range(12):
        mutation = crossover(sibling, deduping, random.Random(rng_seed))
        seen.add(mutation.description.split(" from ")[0])
        if "write()" in mutation.description:
            # write() reads self._stored_texts, so the __init__ setting it came too.
            assert "__init__()" in mutation.description
            assert "self._stored_texts = set()" in mutation.source
    assert "take __init__()" not in seen, "an __init__ alone would only add state nothing reads"


# --------------------------------------------------------------------------------------------------
# propose: determinism, switches, nothing to do
# --------------------------------------------------------------------------------------------------


def run_proposals(rng_seed: int, count: int = 12) -> list[Mutation]:
    rng = random.Random(rng_seed)
    population = list(SEEDS.values())
    out = []
    for i in range(count):
        child = propose(population[i % len(population)], population, rng)
        population.append(child.source)
        out.append(child)
    return out


def test_propose_is_deterministic_for_a_seed() -> None:
    assert run_proposals(7) == run_proposals(7)
    assert run_proposals(7) != run_proposals(8)


def test_propose_does_not_depend_on_the_hash_seed() -> None:
    script = (
        "import hashlib, random\n"
        "from tests.test_mutations import run_proposals\n"
        "print(hashlib.sha1(''.join(m.source + m.description for m in run_proposals(3, 8)).encode()).hexdigest())\n"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for hash_seed in ("1", "2")
    }
    assert len(digests) == 1


def test_propose_never_returns_a_known_program() -> None:
    population = list(SEEDS.values())
    rng = random.Random(0)
    for _ in range(25):
        child = propose(SEEDS["vector_search"], population, rng)
        assert child.source not in population
        assert_valid_child(SEEDS["vector_search"], child)
        population.append(child.source)


def test_frozen_code_only_edits_instructions() -> None:
    rng = random.Random(0)
    for parent in SEEDS.values():
        for _ in range(6):
            child = propose(parent, list(SEEDS.values()), rng, frozen_code=True)
            assert child.kind == "edit_instruction"
            removed, _ = changed_lines(parent, child.source)
            assert all(not line.startswith("        ") for line in removed)  # no method body touched


def test_frozen_instructions_never_changes_an_instruction() -> None:
    rng = random.Random(0)
    for parent in SEEDS.values():
        before = inspect_program(parent).constants
        for _ in range(8):
            child = propose(parent, list(SEEDS.values()), rng, frozen_instructions=True)
            assert child.kind != "edit_instruction"
            after = inspect_program(child.source).constants
            assert all(before[name] == after[name] for name in REQUIRED_CONSTANTS)


def test_no_mutation_when_nothing_applies() -> None:
    assert check_source(MINIMAL) == []
    rng = random.Random(0)
    for kind in ("perturb_numbers", "filter_writes", "order_by_recency"):
        with pytest.raises(NoMutation):
            SINGLE_KINDS[kind](MINIMAL, rng)
    with pytest.raises(NoMutation):
        crossover(MINIMAL, MINIMAL, rng)
    with pytest.raises(NoMutation):
        propose(MINIMAL, [MINIMAL], rng, frozen_instructions=True)
    with pytest.raises(NoMutation):
        propose(MINIMAL, [MINIMAL], rng, frozen_code=True, frozen_instructions=True)
    # Instructions can still be edited, so the unfrozen search goes on.
    assert propose(MINIMAL, [MINIMAL], rng).kind == "edit_instruction"


# --------------------------------------------------------------------------------------------------
# one real run: a cross-lineage crossover child loads, writes and reads in the sandbox
# --------------------------------------------------------------------------------------------------


def test_a_crossover_child_runs_in_the_sandbox() -> None:
    mutation = crossover(SEEDS["vector_search"], SEEDS["experience_learner"], random.Random(1))
    assert "KnowledgeBase" in mutation.description or "read()" in mutation.description
    task = load_task("synthetic", seed=0, limit=4)
    report = evaluate(mutation.source, task, OfflineBackend(), HashingEmbedder())
    assert report.violation is None
    assert report.texts_written == len(task.texts)
    assert report.write_errors == 0
