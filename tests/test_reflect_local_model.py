"""The ``function`` edit format against a real small model (SmolLM2-135M on llama.cpp, 2,048-token
context): the prompt is sized to fit, every reply becomes a checked child or a discard with its errors,
and nothing is refused for length. How many replies are valid is measured, not asserted
(scripts/bench_edit_formats.py --smollm2): a 135M model writes poor code."""

from __future__ import annotations

import random

import pytest

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.llm.cache import MemoryCache
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig
from mstar_ray.program_id import program_id
from mstar_ray.reflect.one_shot import LLMReflector
from mstar_ray.reflect.reflector import Child, Discard
from mstar_ray.reflect.request import ReflectionRequest, sample_cases
from mstar_ray.reflect.smoke import smoke_test
from mstar_ray.families.task_registry import load_task
from tests.conftest import ROOT


@pytest.mark.slow
def test_smollm2_reflects_in_the_function_format(llm_server):
    task = load_task("synthetic", seed=0)
    # a parent that fits SmolLM2's 2,048-token context beside a 300-token reply and a repair turn (the library's
    # vector_search grew past that when its chunks gained dates; such a parent is discarded as refused)
    source = (ROOT / "tests" / "fixtures" / "seeds_v1" / "vector_search.py").read_text()
    report = evaluate(source, task, OfflineBackend(), HashingEmbedder(), items=task.items[:8])
    failures, success = sample_cases(report.results, random.Random(0))
    request = ReflectionRequest(parent_id=program_id(source), parent_source=source, parent_score=report.score,
                                failures=failures, success=success, write_example=report.write_example)
    config = EndpointConfig(base_url=llm_server.base_url, model=llm_server.model, max_tokens=300, temperature=0.7,
                            json_mode=False, timeout_s=300)
    client = LLMClient(ChatEndpoint("reflector", config), cache=MemoryCache())
    reflector = LLMReflector(client, edit_format="function", context_tokens=llm_server.n_ctx, max_repairs=1)
    results = [reflector.reflect(request, lambda s: smoke_test(s, HashingEmbedder())) for _ in range(2)]
    calls = client.drain_calls()
    assert len(calls) == sum(r.attempts for r in results)
    for result in results:
        if isinstance(result, Child):
            assert result.edit_format in ("function", "v4a", "file") and result.source != source
        else:
            assert isinstance(result, Discard) and len(result.errors) == result.attempts == 2
            assert not any("refused the request" in e for e in result.errors), result.errors  # the prompt fit
    print(f"SmolLM2, function format: {sum(isinstance(r, Child) for r in results)}/2 valid children")
