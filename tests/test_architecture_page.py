"""The architecture page (docs/architecture.md, its "Modules" list) has a line for every package and module of
``mstar_ray/`` and none for one that does not exist: read from the file tree, nothing is imported."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"


def on_disk(root: Path = ROOT) -> set[str]:
    """Each package (``families/qa/``) and module (``families/qa/locomo.py``), relative to ``mstar_ray/``; the
    in-sandbox half under ``sandbox/`` (the top folder ``mstar_ray/sandbox`` links to); the seed library as one
    package (its programs are data)."""
    names: set[str] = set()
    for top, prefix in ((root / "mstar_ray", ""), (root / "sandbox", "sandbox/")):
        for path in top.rglob("*.py"):
            relative = path.relative_to(top)
            if relative.parts[0] == "seeds" and relative != Path("seeds", "__init__.py"):
                continue
            if path.name == "__init__.py":
                if relative.parent != Path("."):
                    names.add(f"{prefix}{relative.parent.as_posix()}/")
                elif prefix:
                    names.add(prefix)
            else:
                names.add(prefix + relative.as_posix())
    return names


def listed(text: str) -> dict[str, str]:
    """The page's Modules list: each named package or module with its description."""
    section = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^- `([^`]+)`: ?(.*)$", section, re.MULTILINE)}


def test_the_tree_is_read(tmp_path) -> None:
    (tmp_path / "mstar_ray" / "pkg").mkdir(parents=True)
    (tmp_path / "mstar_ray" / "seeds" / "programs").mkdir(parents=True)
    (tmp_path / "sandbox").mkdir()
    for name in ("mstar_ray/__init__.py", "mstar_ray/pkg/__init__.py", "mstar_ray/pkg/one.py", "mstar_ray/top.py",
                 "mstar_ray/seeds/__init__.py", "mstar_ray/seeds/programs/seed.py", "sandbox/__init__.py",
                 "sandbox/wire.py"):
        (tmp_path / name).write_text("")
    assert on_disk(tmp_path) == {"pkg/", "pkg/one.py", "top.py", "seeds/", "sandbox/", "sandbox/wire.py"}
    assert listed("x\n## Modules\n\n- `pkg/`: a package\n- `top.py`: a module\n  wrapped\n## Next\n- `b.py`: no\n") \
        == {"pkg/": "a package", "top.py": "a module"}


def test_every_package_and_module_has_its_line_and_no_line_names_a_missing_one() -> None:
    lines = listed(PAGE.read_text(encoding="utf-8"))
    present = on_disk()
    assert "search_loop/policy.py" in present and "sandbox/wire.py" in present
    assert sorted(present - set(lines)) == [], "packages and modules docs/architecture.md does not describe"
    assert sorted(set(lines) - present) == [], "lines of docs/architecture.md naming what does not exist"
    assert [name for name, what in lines.items() if not what] == [], "lines without a description"
