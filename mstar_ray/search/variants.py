"""The ablation's variants (``mstar-ray ablate``): each is the full search with one switch changed. Kept apart
from the driver that runs them so that the CLI can list them in its help without importing it."""

from __future__ import annotations

# name -> the search settings it changes (the paper's Table: full, -Instruction, -Code, max-parent, no population).
VARIANTS: dict[str, dict[str, object]] = {
    "full": {},
    "-Instruction": {"frozen_instructions": True},
    "-Code": {"frozen_code": True},
    "max-parent": {"parent_selection": "greedy"},
    "no population": {"parent_selection": "chain"},
    "best-of-N": {"parent_selection": "seeds"},
}
BASELINE = "best-of-N"


def slug(name: str) -> str:
    """The variant's name as ``--variants`` takes it: ``-Code`` is ``code-off``, ``no population`` ``no-population``."""
    return name.strip("-").replace(" ", "-").lower() + ("-off" if name.startswith("-") else "")


def described() -> str:
    """Every variant with its slug and what it changes, for ``ablate --help``."""
    return "; ".join(f"{slug(name)} ({name}: " + (", ".join(f"{k}={v}" for k, v in switch.items()) or "as configured")
                     + ")" for name, switch in VARIANTS.items())
