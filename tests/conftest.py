from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "seeds"
HOSTILE = Path(__file__).resolve().parent / "hostile"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.json"


def seed_source(name: str) -> str:
    return (SEEDS / f"{name}.py").read_text()


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo data not found at {LOCOMO}")
    return LOCOMO
