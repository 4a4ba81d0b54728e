"""The dependency order holds: no import cycle between the subpackages (and top-level modules) of
``mstar_ray``, the in-sandbox half (``sandbox/``, installed as ``mstar_ray.sandbox``) imports nothing else of
``mstar_ray``, and the architecture page's map of the packages
(docs/architecture.md, its "Layout" block, one level of the order per ``->``) names every one of them and puts none above what it imports. Read from the source with ``ast`` (nothing is
imported or run), counting every import, also those inside functions and behind ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Each folder of the checkout and the package it is imported as: ``mstar_ray/sandbox`` is a link to ``sandbox/``
# (which rglob does not follow), so the in-sandbox modules are read once, under the name the host imports them by.
PACKAGES = {"mstar_ray": "mstar_ray", "sandbox": "mstar_ray.sandbox"}
SANDBOX = "mstar_ray.sandbox"


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = (*package.split("."), *path.relative_to(ROOT / folder).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every project module ``name`` imports (``from P import M`` counts as importing ``P.M`` when M is one)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
    return {t for t in targets if t.split(".")[0] == "mstar_ray"}


def unit(module: str) -> str:
    """The part of the tree a module belongs to: a subpackage or top-level module of mstar_ray (the in-sandbox
    half is one, ``mstar_ray.sandbox``). A nested package is part of its parent's unit, with no exception: a
    folder that imports what imports its parent puts the parent in a cycle, whatever its own place."""
    return ".".join(module.split(".")[:2])


def unit_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        for target in _imported(name, path, modules):
            if unit(target) != unit(name):
                graph.setdefault(unit(name), set()).add(unit(target))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_cycles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_relative_and_from_imports_are_counted(tmp_path) -> None:
    package = tmp_path / "mstar_ray" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "one.py").write_text("from . import two\nfrom ..other import thing\nfrom mstar_ray import three\n")
    modules = {"mstar_ray.pkg": package / "__init__.py", "mstar_ray.pkg.one": package / "one.py",
               "mstar_ray.pkg.two": package / "two.py", "mstar_ray.three": package / "x.py"}
    found = _imported("mstar_ray.pkg.one", package / "one.py", modules)
    assert found == {"mstar_ray.pkg.two", "mstar_ray.other", "mstar_ray.three"}


def test_a_nested_package_is_part_of_its_parent() -> None:
    # A folder of search/ that imports state/, which imports search/, is a cycle of search/ and state/.
    assert unit("mstar_ray.search.loop.policy") == unit("mstar_ray.search") == "mstar_ray.search"
    assert unit("mstar_ray.run_config") == "mstar_ray.run_config"
    assert cycles({unit("mstar_ray.search.loop.policy"): {"mstar_ray.state"},
                   "mstar_ray.state": {unit("mstar_ray.search.stop")}}) == [["mstar_ray.search", "mstar_ray.state"]]


def test_no_import_cycle_between_subpackages() -> None:
    graph = unit_graph()
    assert "mstar_ray.agent" in graph and "mstar_ray.driver" in graph  # the graph was read
    assert cycles(graph) == []


def test_the_modules_are_read_once_each() -> None:
    modules = _modules()
    assert "mstar_ray.sandbox.wire" in modules and "mstar_ray.sandbox_host.process" in modules
    assert not any(name.startswith("sandbox") for name in modules)


def test_sandbox_imports_nothing_of_mstar_ray() -> None:
    graph = unit_graph()
    assert any(SANDBOX in targets for targets in graph.values())  # the host's imports of it were read
    assert graph.get(SANDBOX, set()) == set()


def readme_levels() -> dict[str, int]:
    """Each mstar_ray unit the architecture page's Layout block names, with its level (0 at the top, one per ``->``):
    the names outside parentheses, and those of a ``(+ ...)`` aside."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    body = block.split("mstar_ray/", 1)[1].split("\nsandbox/", 1)[0]
    levels: dict[str, int] = {}
    for level, part in enumerate(body.split("->")):
        kept, depth, aside = [], 0, False
        for i, char in enumerate(part):
            if char == "(":
                aside = aside if depth else part.startswith("(+", i)
                depth += 1
            elif char == ")":
                depth -= 1
            kept.append(char if depth == 0 or aside else " ")
        for name in re.findall(r"\b([a-z_]+(?:/[a-z_]+)*)(?:/|\.py\b)", "".join(kept)):
            levels.setdefault(name.replace("/", "."), level)
    return levels


def test_the_readme_map_names_every_unit_and_its_order_holds() -> None:
    levels = readme_levels()
    graph = unit_graph()
    units = {u.removeprefix("mstar_ray.") for u in set(graph) | {t for ts in graph.values() for t in ts}
             if u.startswith("mstar_ray.")}
    assert units - set(levels) == set(), "units the architecture page's Layout map does not name"
    wrong = sorted(f"{a} -> {b}" for a, targets in graph.items() if a.startswith("mstar_ray.") for b in targets
                   if b.startswith("mstar_ray.") and levels[b.removeprefix("mstar_ray.")] < levels[a.removeprefix("mstar_ray.")])
    assert wrong == [], "imports of a unit the architecture page's map puts above the importer"
