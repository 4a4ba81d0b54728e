from __future__ import annotations

import subprocess
import sys

import pytest

from mstar_ray.contract import ContractError, check_source, inspect_program
from tests.conftest import SEEDS

VALID = '''
from dataclasses import dataclass, field
from typing import Optional

INSTRUCTION_KNOWLEDGE_ITEM = "extract"
INSTRUCTION_QUERY = "query"
INSTRUCTION_RESPONSE = "respond"
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str = field(metadata={"description": "what was said"})
    tags: list[str] = field(default_factory=list)
    when: Optional[str] = None
    score: float = 0.0


@dataclass
class Query:
    question: str
    filters: dict[str, int] | None = None


class KnowledgeBase:
    def __init__(self, toolkit):
        self.items = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.items.append(item)

    def read(self, query: Query) -> str:
        return ""
'''

BROKEN = '''
import os
from dataclasses import dataclass
import subprocess as sp

INSTRUCTION_QUERY = "q"
INSTRUCTION_RESPONSE = 42


class KnowledgeItem:
    text: str


@dataclass
class Query:
    when: tuple[int, int]
    raw: bytes
    tags: list = []


class KnowledgeBase:
    def __init__(self):
        pass

    async def write(self, item, raw_text):
        pass

    def read(self, query, extra):
        return eval("1") + ().__class__.__name__
'''


@pytest.mark.parametrize("seed", sorted(p.name for p in SEEDS.glob("*.py")))
def test_every_seed_passes(seed):
    assert check_source((SEEDS / seed).read_text()) == []


def test_valid_program_schema_is_read_without_running_it():
    info = inspect_program(VALID)
    item = {f.name: f for f in info.schema.knowledge_item}
    assert item["text"].type == "str" and item["text"].description == "what was said"
    assert item["tags"].type == "list[str]" and item["tags"].has_default
    assert item["when"].optional and item["when"].type == "str"
    query = {f.name: f for f in info.schema.query}
    assert query["filters"].type == "dict[str, int]" and query["filters"].optional
    assert info.constants["INSTRUCTION_RESPONSE"] == "respond"


def test_every_violation_is_reported_at_once_with_its_line():
    violations = check_source(BROKEN)
    found = {(v.line, v.code) for v in violations}
    lines = BROKEN.splitlines()

    def line_of(text: str) -> int:
        return next(i for i, line in enumerate(lines, start=1) if text in line)

    expected = {
        (line_of("import os"), "import"),
        (line_of("import subprocess"), "import"),
        (line_of("class KnowledgeItem"), "not-dataclass"),
        (line_of("when: tuple"), "field-type"),
        (line_of("raw: bytes"), "field-type"),
        (line_of("tags: list = []"), "field-type"),
        (line_of("def __init__(self)"), "signature"),
        (line_of("async def write"), "signature"),
        (line_of("def read(self, query, extra)"), "signature"),
        (line_of('eval("1")'), "forbidden-name"),
        (line_of('eval("1")'), "forbidden-attribute"),
        (line_of("INSTRUCTION_RESPONSE = 42"), "constant"),
        (1, "missing-constant"),
    }
    assert expected <= found, expected - found
    messages = " ".join(v.message for v in violations)
    assert "INSTRUCTION_KNOWLEDGE_ITEM" in messages and "ALWAYS_ON_KNOWLEDGE" in messages
    assert violations == sorted(violations, key=lambda v: (v.line, v.code))


def test_missing_classes_are_named():
    source = 'INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""\n'
    messages = [v.message for v in check_source(source)]
    for name in ("KnowledgeItem", "Query", "KnowledgeBase"):
        assert any(name in m for m in messages)


def test_syntax_error_reports_its_line():
    (violation,) = check_source("x = 1\ndef broken(:\n")
    assert violation.code == "syntax" and violation.line == 2


def test_mutable_default_is_rejected_before_it_crashes_at_import():
    source = VALID.replace("field(default_factory=list)", "[]")
    assert any(v.code == "field-default" for v in check_source(source))


def test_inspect_program_raises_with_all_violations():
    with pytest.raises(ContractError) as caught:
        inspect_program(BROKEN, "broken.py")
    assert len(caught.value.violations) >= 10
    assert "broken.py:" in str(caught.value)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mstar_ray.cli", *args], capture_output=True, text=True, timeout=120)


def test_check_command_exit_codes(tmp_path):
    good = run_cli("check", str(SEEDS / "vector_search.py"))
    assert good.returncode == 0 and "ok" in good.stdout
    broken = tmp_path / "broken.py"
    broken.write_text(BROKEN)
    bad = run_cli("check", str(broken))
    assert bad.returncode == 1
    assert bad.stdout.count(str(broken)) >= 10 and "line " in bad.stdout
    missing = run_cli("check", str(tmp_path / "absent.py"))
    assert missing.returncode == 2 and "not found" in missing.stderr
