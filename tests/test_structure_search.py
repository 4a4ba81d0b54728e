"""Structure in the search: a child that differs from a known program only in comments is not evaluated
again (its score is reused and logged), every child's novelty is logged, and the index behind both."""

from __future__ import annotations

import json

import yaml

from mstar_ray.cli import main
from mstar_ray.structure.index import StructureIndex
from scripts.fault_resume import table
from tests.conftest import SEEDS, seed_source
from tests.scripted_server import ScriptedServer


# A docstring only: the code is not the parent's (a comment-only change is refused by the reflector's own
# check as no change), but its structure is.
COMMENT_ONLY = """COMMIT_MESSAGE: explain write
*** Begin Patch
*** Update File: program.py
@@
     def write(self, item: KnowledgeItem, raw_text: str) -> None:
+        \"\"\"Every chunk of the text is stored with its position.\"\"\"
         pieces = chunk(raw_text, CHUNK_CHARS)
*** End Patch"""

REAL_CHANGE = """COMMIT_MESSAGE: newest chunks first
*** Begin Patch
*** Update File: program.py
@@
-        docs = found["documents"][0]
+        docs = list(reversed(found["documents"][0]))
*** End Patch"""


def test_a_structural_duplicate_is_not_evaluated_and_novelty_is_logged(tmp_path):
    with ScriptedServer() as server:
        server.replies.extend([COMMENT_ONLY, REAL_CHANGE])
        config = {
            "task": {"name": "synthetic", "seed": 1},
            "split": {"static_size": 6, "rotating_size": 2, "train_ratio": 2.0},
            "search": {"seeds": [str(SEEDS / "vector_search.py")], "max_candidates": 2, "max_iterations": 2,
                       "reflector": "llm",
                       "reflections_in_flight": 1, "evaluations_in_flight": 1},
            "llm": {"embedding": {"kind": "hashing"},
                    "reflector": {"base_url": server.base_url, "model": "scripted", "json_mode": False,
                                  "timeout_s": 30}},  # no start-up speed check to take the scripted replies
            "ray": {"num_cpus": 2},
        }
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(config))
        run_dir = tmp_path / "run"
        assert main(["run", str(path), "--run-dir", str(run_dir)]) == 0
        second_prompt = server.prompts[1][1]["content"]
    rows = {r["commit_message"]: r for r in table(run_dir, "candidates")}
    seed, duplicate, child = rows["seed vector_search"], rows["explain write"], rows["newest chunks first"]
    assert duplicate["status"] == "duplicate" and duplicate["duplicate_of"] == seed["id"]
    assert duplicate["static_score"] == seed["static_score"] and duplicate["structural_key"] == seed["structural_key"]
    assert child["status"] == "evaluated" and child["edit_format"] == "v4a" and child["tolerances"] == []
    assert 0 < child["novelty_parent"] <= child["novelty_population"] + 1e-12 < 1
    assert seed["novelty_parent"] is None and seed["novelty_population"] is None  # the first program known
    assert "structurally identical" in second_prompt  # the reflector learns the change did nothing
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["duplicates"] == 1 and summary["candidates_evaluated"] == 1
    assert len({e["candidate"] for e in table(run_dir, "events") if e["kind"] == "submitted"}) == 2


def test_the_index_finds_the_first_program_of_a_structure_and_the_nearest_one():
    index = StructureIndex("names")
    parent = seed_source("vector_search")
    first = index.place(parent, None)
    assert (first.duplicate_of, first.to_parent, first.to_population) == (None, None, None)
    index.add("p", first)
    reformatted = parent.replace("TOP_K = 5", "TOP_K = 5  # tuned").replace('"""Seed: Vector', '"""Seed:  Vector')
    assert index.place(reformatted, "p").duplicate_of == "p"
    changed = index.place(parent.replace("TOP_K = 5", "TOP_K = 8"), "p")
    assert changed.duplicate_of is None and changed.to_parent == 0.0  # literals are abstracted at "names"
    other = index.place(seed_source("experience_learner"), "p")
    assert other.to_parent == other.to_population > 0
    index.learn("q", seed_source("experience_learner"))
    assert index.place(seed_source("experience_learner") + "\n# end\n", "p").duplicate_of == "q" and len(index) == 2
    assert index.place("def broken(:\n", "p").key is None
