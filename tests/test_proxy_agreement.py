"""scripts/proxy_agreement.py: the rank statistics, extraction from a runs.js file, and a real run on programs of
our own whose order under a model is known by construction (tests/fixtures/proxy_programs)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.proxy_agreement import kendall_tau_b, pooled_draws, read_runs_js
from scripts.rank_agreement import spearman

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "fixtures" / "proxy_programs"


def test_kendall_tau_b_on_known_orders() -> None:
    assert kendall_tau_b([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    # one discordant pair of six: (5 - 1) / 6
    assert kendall_tau_b([1, 2, 3, 4], [1, 2, 4, 3]) == pytest.approx(4 / 6)
    # ties: tau-b = (C - D) / sqrt((n0 - n1)(n0 - n2)); x has one tied pair, so 5 pairs count for x, 6 for y
    assert kendall_tau_b([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(5 / (5 * 6) ** 0.5)
    assert math.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))  # x has no order


RUNS_JS = r"""window.TREE_DATA = {
  "locomo": {"label": "LoCoMo", "nodes": [
      {"id": "a-0", "iter": 0, "parent": null, "score": 0.1, "label": "Seed"},
      {"id": "a-1", "iter": 1, "parent": "a-0", "score": 0.3, "label": "Iter 1"},
      {"id": "a-2", "iter": 2, "parent": "a-1", "score": 0.2, "label": "Iter 2"},
  ]},
  "other": {"label": "Other", "nodes": [{"id": "b-0", "score": 0.5}]},
};
window.CODE_MAP = {
  "a-0": `import re
SPLIT = re.compile(r"\s+")
JOINER = "\n\n"
QUOTES = " \"'\`"
`,
  "a-1": `X = 1
`,
  "b-0": `Y = 2
`,
};
"""


def test_runs_js_programs_keep_their_python_escapes(tmp_path: Path) -> None:
    path = tmp_path / "runs.js"
    path.write_text(RUNS_JS)
    sources, scores = read_runs_js(path, "locomo")
    # a-2 has no code, b-0 is another run's
    assert scores == {"a-0": 0.1, "a-1": 0.3}
    assert set(sources) == {"a-0", "a-1"}
    # The source as written: regex and string escapes stay for Python to read; only the backtick is unescaped.
    assert 'r"\\s+"' in sources["a-0"] and '"\\n\\n"' in sources["a-0"] and "\"'`\"" in sources["a-0"]
    namespace: dict = {}
    exec(compile(sources["a-0"], "a-0", "exec"), namespace)  # noqa: S102 -- our own test text
    assert namespace["JOINER"] == "\n\n" and namespace["SPLIT"].split("a  b") == ["a", "b"]
    with pytest.raises(ValueError, match="no run 'nope'"):
        read_runs_js(path, "nope")


def test_pooled_draws_follow_the_reference_protocol_over_conversations_that_reuse_ids() -> None:
    import numpy as np

    from mstar_ray.embedding.hashing import HashingEmbedder
    from mstar_ray.search.subsets import facility_location
    from mstar_ray.families.task_registry import load_task

    worlds = [load_task("synthetic", seed=seed, sessions=8, personas=2, questions_per_category=4) for seed in (1, 2)]
    assert {t.id for t in worlds[0].texts} & {t.id for t in worlds[1].texts}  # the ids collide, as LoCoMo's do
    embedder = HashingEmbedder()
    draws = list(pooled_draws(worlds, 6, 2, embedder))
    assert [label for label, _ in draws] == ["draw 0", "draw 1"]
    for _, task in draws:
        assert len(task.items) == 6 and len(task.texts) == 12
        assert len({t.id for t in task.texts}) == 12
        units = {u.id for t in task.texts for u in t.units}
        all_units = {f"c{n}/{u.id}" for n, w in enumerate(worlds) for t in w.texts for u in t.units}
        assert all(e in all_units for q in task.items for e in q.evidence)  # evidence names the prefixed turns
        assert any(e in units for q in task.items for e in q.evidence)
        # Written most-covering first: the order facility location picks them in, not the conversations' order.
        questions = np.asarray(embedder.embed([q.question for q in task.items]))
        everything = [t for n, w in enumerate(worlds) for t in w.texts]
        vectors = np.asarray(embedder.embed([t.text for t in everything]))
        picked = facility_location(questions, vectors, 12)
        assert [t.text for t in task.texts] == [everything[i].text for i in picked]


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "proxy_agreement.py"), *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=600)


def test_extract_only_writes_programs_and_scores(tmp_path: Path) -> None:
    (tmp_path / "runs.js").write_text(RUNS_JS)
    done = _run(str(tmp_path / "out"), "--from-runs-js", str(tmp_path / "runs.js"), "--extract-only")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out" / "scores.json").read_text()) == {"a-0": 0.1, "a-1": 0.3}
    assert (tmp_path / "out" / "a-1.py").read_text() == "X = 1\n"


def test_bad_scores_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "scores.json").write_text('{"missing": 1.0, "p0_entities": 0.0, "p1_summary": 1.0}')
    done = _run(str(PROGRAMS), str(tmp_path / "scores.json"))
    assert done.returncode != 0 and "scores.json" in done.stderr and "missing" in done.stderr
    done = _run(str(PROGRAMS), "--pooled", "0")
    assert done.returncode == 2 and "--pooled and --draws take a positive number" in done.stderr


def test_offline_agent_orders_programs_by_the_fields_they_keep(tmp_path: Path) -> None:
    """The same program with its extraction fields removed: offline, keeping the summary and facts must beat keeping
    only the entities, as it would with any model, and the script must say so in its figures."""
    out = tmp_path / "figures.json"
    done = _run(str(PROGRAMS), "--task", "synthetic", "--embedder", "hashing", "--json", str(out))
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    mean = figures["mean"]
    assert mean["p0_entities"] < min(mean["p1_summary"], mean["p2_facts_summary_date"]) - 0.1
    assert figures["spearman"] > 0 and figures["spearman"] == pytest.approx(
        spearman([mean[k] for k in figures["given"]], list(figures["given"].values())))
    assert not figures["failures"]
    assert "Spearman rho" in done.stdout and "stand-in" in done.stdout
    for program in figures["given"]:
        assert program in done.stdout
