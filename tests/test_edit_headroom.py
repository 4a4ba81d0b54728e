"""scripts/edit_headroom.py: a real run on a small synthetic world, and its best gain reproduced by applying the
edits it names to the seed and evaluating both again."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from mstar_ray.actors.wiring import RoleClients
from mstar_ray.agent.evaluation import evaluate
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.families.task_registry import load_task
from scripts.edit_headroom import apply
from tests.conftest import seed_source
from tests.test_mutations import MINIMAL

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """\
task: {name: synthetic, seed: 3, sessions: 6, personas: 2, questions_per_category: 3}
search: {seeds: [vector_search, experience_learner]}
llm: {embedding: {kind: hashing}}
"""


def test_the_best_gain_it_prints_is_what_the_named_edits_give(tmp_path: Path) -> None:
    config = tmp_path / "world.yaml"
    config.write_text(CONFIG)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "edit_headroom.py"), str(config), "--depth", "1"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    lines = {line.split(":", 1)[0]: line for line in done.stdout.splitlines() if ":" in line}
    assert {"vector_search", "experience_learner"} <= set(lines)
    assert done.stdout.splitlines()[-1].startswith("headroom over the best seed (")
    found = re.search(r"^vector_search: ([\d.]+); (\d+) edited programs; best (\S+) ([\d.]+) \(([+-][\d.]+)\)",
                      lines["vector_search"])
    assert found, lines["vector_search"]
    base, tried, combo, best, gain = float(found[1]), int(found[2]), found[3], float(found[4]), float(found[5])
    assert tried > 0 and abs(best - base - gain) < 2e-3

    roles = RoleClients(LLMSettings.model_validate({"embedding": {"kind": "hashing"}}))
    backend, embedder = roles.backend(), roles.embedder()
    task = load_task("synthetic", seed=3, sessions=6, personas=2, questions_per_category=3)
    seed = seed_source("vector_search")
    assert abs(evaluate(seed, task, backend, embedder).score - base) < 5e-4
    if combo == "(none)":
        assert gain == 0.0
        return
    child = apply(seed, tuple(combo.split("+")))
    assert child is not None and child != seed
    assert abs(evaluate(child, task, backend, embedder).score - base - gain) < 1e-3


def test_an_edit_that_does_not_apply_gives_no_program() -> None:
    seed = seed_source("vector_search")
    assert apply(seed, ()) == seed
    assert apply(seed, ("fuse_keyword_scores",)) not in (None, seed)
    # nothing to reorder in a program that keeps nothing and reads a constant
    assert apply(MINIMAL, ("order_by_recency",)) is None
