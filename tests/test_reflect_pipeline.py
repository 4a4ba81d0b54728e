"""The reflector's path from a reply to a checked child: a good patch becomes a child; a broken one goes
back with its full error (and each repair request differs from the last); after the repairs the
candidate is discarded with every error kept. The offline reflector takes the same path."""

from __future__ import annotations

import random

from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.llm.cache import MemoryCache
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig
from mstar_ray.program_id import program_id
from mstar_ray.reflect.prompt import reflection_messages
from mstar_ray.reflect.offline.guided import OfflineReflector
from mstar_ray.reflect.one_shot import LLMReflector
from mstar_ray.reflect.reflector import Child, Discard, frozen_violation
from mstar_ray.reflect.request import LineageEntry, ReflectionRequest, sample_cases
from mstar_ray.reflect.smoke import smoke_test
from mstar_ray.results import ItemResult
from tests.conftest import seed_source
from tests.scripted_server import ScriptedServer

PARENT = seed_source("vector_search")

GOOD = """COMMIT_MESSAGE: return more chunks so multi-hop questions find both facts
*** Begin Patch
*** Update File: program.py
@@
-TOP_K = 5
+TOP_K = 8
*** End Patch"""

BAD_CONTEXT = """COMMIT_MESSAGE: try something
*** Begin Patch
*** Update File: program.py
@@
-TOP_K = 50000000
+TOP_K = 8
*** End Patch"""

BREAKS_CONTRACT = """COMMIT_MESSAGE: use os for paths
*** Begin Patch
*** Update File: program.py
@@
-from dataclasses import dataclass, field
+import os
+from dataclasses import dataclass, field
*** End Patch"""

CRASHES = """COMMIT_MESSAGE: divide by zero
*** Begin Patch
*** Update File: program.py
@@     def read(self, query: Query) -> str:
         if self.count == 0:
             return ""
+        1 / 0
*** End Patch"""


def smoke(source: str) -> str | None:
    return smoke_test(source, HashingEmbedder())


def request(**overrides) -> ReflectionRequest:
    return ReflectionRequest(parent_id=program_id(PARENT), parent_source=PARENT, parent_score=0.3, **overrides)


def reflector_for(server: ScriptedServer) -> LLMReflector:
    endpoint = ChatEndpoint("reflector", EndpointConfig(base_url=server.base_url, model="scripted"))
    return LLMReflector(LLMClient(endpoint, cache=MemoryCache()), max_repairs=3)


def test_a_good_patch_becomes_a_checked_child():
    with ScriptedServer() as server:
        server.replies.append(GOOD)
        child = reflector_for(server).reflect(request(), smoke)
    assert isinstance(child, Child) and child.attempts == 1 and child.edit_format == "v4a"
    assert "TOP_K = 8" in child.source and child.id == program_id(child.source)
    assert child.commit_message.startswith("return more chunks")


def test_failures_go_back_with_their_errors_until_one_passes():
    with ScriptedServer() as server:
        server.replies.extend([BAD_CONTEXT, BREAKS_CONTRACT, CRASHES, GOOD])
        child = reflector_for(server).reflect(request(), smoke)
        prompts = server.prompts
    assert isinstance(child, Child) and child.attempts == 4 and len(child.errors) == 3
    assert "hunk 1" in child.errors[0]
    assert "os" in child.errors[1] and "contract" in child.errors[1]
    assert "ZeroDivisionError" in child.errors[2] and "read()" in child.errors[2]
    # every repair carries the failed reply and its error, so no two requests are the same
    assert len({str(p) for p in prompts}) == 4
    assert "Attempt 3 of 4 failed" in prompts[3][-1]["content"] and "ZeroDivisionError" in prompts[3][-1]["content"]


def test_after_the_repairs_the_candidate_is_discarded_with_every_error():
    with ScriptedServer(reply="I cannot help with that.") as server:
        result = reflector_for(server).reflect(request(), smoke)
        assert server.requests == 4
    assert isinstance(result, Discard) and result.attempts == 4 and len(result.errors) == 4


def test_a_child_already_evaluated_is_refused():
    with ScriptedServer() as server:
        server.replies.extend([GOOD, GOOD])
        child_source = PARENT.replace("TOP_K = 5", "TOP_K = 8")
        result = reflector_for(server).reflect(request(known_ids=[program_id(child_source)]), smoke)
    assert isinstance(result, Discard) and "already evaluated" in result.errors[0]


def test_frozen_parts_are_enforced():
    instruction_edit = PARENT.replace("Keep names, dates", "Keep every name, date")
    code_edit = PARENT.replace("TOP_K = 5", "TOP_K = 8")
    assert frozen_violation(PARENT, code_edit, frozen_code=True, frozen_instructions=False)
    assert frozen_violation(PARENT, instruction_edit, frozen_code=True, frozen_instructions=False) is None
    assert frozen_violation(PARENT, instruction_edit, frozen_code=False, frozen_instructions=True)
    assert frozen_violation(PARENT, code_edit, frozen_code=False, frozen_instructions=True) is None


def test_the_offline_reflector_takes_the_same_path():
    donors = [seed_source("experience_learner"), seed_source("llm_summarizer")]
    results = [OfflineReflector().reflect(request(donors=donors, seed=s), smoke) for s in range(4)]
    children = [r for r in results if isinstance(r, Child)]
    assert len(children) >= 3
    for child in children:
        assert child.origin.startswith("mutation:") and child.patch and "*** Begin Patch" in child.patch
        assert child.source != PARENT


def test_the_prompt_holds_what_the_paper_lists():
    results = [ItemResult(id=f"q{i}", category="c", question=f"Question {i}?", expected="x", prediction="y",
                              score=s, context=f"ctx {i}") for i, s in enumerate([0.0, 0.2, 0.5, 1.0, 0.9])]
    failures, success = sample_cases(results, random.Random(0))
    assert len(failures) == 3 and all(f.score < 1 for f in failures) and success.score == 1.0
    lineage = [LineageEntry(id="a", relation="parent", commit_message="seed", score=0.3),
               LineageEntry(id="b", relation="child", commit_message="more chunks", score=0.25, delta=-0.05)]
    text = reflection_messages(request(failures=failures, success=success, lineage=lineage,
                                       write_example={"raw_text": "Ana: hi", "item": {"speaker": "Ana"}}))[1]["content"]
    for expected in ("static score 0.300", "Failed case 3", "A case that worked", "REGRESSION", "write() received",
                     "*** Begin Patch", "class KnowledgeBase"):
        assert expected in text


def test_failure_sampling_prefers_low_scores():
    results = [ItemResult(id=f"q{i}", category="c", question="?", expected="x", score=s)
               for i, s in enumerate([0.0, 0.95])]
    firsts = [sample_cases(results, random.Random(seed))[0][0].score for seed in range(200)]
    assert firsts.count(0.0) > 150
