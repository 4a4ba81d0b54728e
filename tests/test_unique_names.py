"""One name per idea: no two classes of the package share a public name, and no two modules share a basename
unless the name is a pattern every package of its kind follows (each family's ``offline`` stand-in, each layer's
``base`` interface, ...). Read from the source with ``ast``; the seed programs are candidates, not the package."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Basenames that name one role in each package that has it, so a reader knows what each is from its folder.
SHARED_ROLES = {
    "__init__": "a package",
    "base": "a layer's interface (envs, families, reflect)",
    "errors": "a layer's exceptions (llm, embedding)",
    "offline": "a family's offline stand-in (qa, rubric, episode)",
    "backend": "the task agent's protocol (agent/backend.py) and its offline implementation (agent/offline/)",
}


def _sources() -> list[Path]:
    found = [p for p in (ROOT / "mstar_ray").rglob("*.py") if "seeds" not in p.relative_to(ROOT).parts]
    return found + list((ROOT / "sandbox").rglob("*.py"))


def duplicate_classes(paths: list[Path], root: Path = ROOT) -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(str(path.relative_to(root)))
    return {name: places for name, places in where.items() if len(places) > 1}


def duplicate_basenames(paths: list[Path], root: Path = ROOT) -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        where[path.stem].append(str(path.relative_to(root)))
    return {name: places for name, places in where.items() if len(places) > 1 and name not in SHARED_ROLES}


def test_the_checks_find_a_repeated_name(tmp_path) -> None:
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "pipeline.py").write_text("class Budget:\n    pass\nclass _Private:\n    pass\n")
    paths = sorted(tmp_path.rglob("*.py"))
    assert duplicate_classes(paths, tmp_path) == {"Budget": ["one/pipeline.py", "two/pipeline.py"]}
    assert duplicate_basenames(paths, tmp_path) == {"pipeline": ["one/pipeline.py", "two/pipeline.py"]}


def test_no_two_public_classes_share_a_name() -> None:
    paths = _sources()
    assert len(paths) > 150  # the package was read
    assert duplicate_classes(paths) == {}


def test_no_two_modules_share_a_basename_outside_a_shared_role() -> None:
    assert duplicate_basenames(_sources()) == {}
