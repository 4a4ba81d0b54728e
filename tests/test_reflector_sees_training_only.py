"""The reflector is never shown the answers of the questions that score a program (the static set, the
confirmation slice, the held-out test): its failure and success cases come from the rotating set, as in the
paper. Checked on the request the driver builds and on the prompt of every edit format.

The evaluations are stand-ins that score the static questions high and the rest low, so that, were the
static results in reach, the weighted draw and the best success would pick them."""

from __future__ import annotations

import io
from pathlib import Path

from mstar_ray.search_loop.policy import SearchPolicy
from mstar_ray.driver.progress import Progress, ProgressState
from mstar_ray.driver.recorder import RunRecorder
from mstar_ray.driver.run_dir import RunDir
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.reflect.edit_formats import EDIT_FORMATS
from mstar_ray.reflect.prompt import reflection_messages
from mstar_ray.run_config import RunConfig
from mstar_ray.search.split import SplitPlan
from mstar_ray.state.candidate import Seed
from mstar_ray.families.qa.synthetic import make_synthetic
from tests.conftest import SEEDS
from tests.test_policy import InProcessPool


def policy_and_plan(tmp_path: Path) -> tuple[SearchPolicy, SplitPlan]:
    config = RunConfig.model_validate({
        "task": {"name": "synthetic", "seed": 1},
        "split": {"static_size": 6, "rotating_size": 3, "train_ratio": 2.0, "confirmation_size": 3},
        "search": {"max_candidates": 2, "reflector": "offline"},
        "llm": {"embedding": {"kind": "hashing"}},
    })
    task = make_synthetic(seed=1)
    plan = SplitPlan(task, HashingEmbedder(), test_fraction=config.split.test_fraction, static_size=6,
                     rotating_size=3, train_ratio=2.0, seed=0, confirmation_size=3)
    run_dir = RunDir(tmp_path / "run")
    run_dir.write_split(plan.split)
    policy = SearchPolicy(config, task, plan, RunRecorder(run_dir, Progress(io.StringIO()), ProgressState()),
                          evaluators=1, llm_spent=lambda: None)
    return policy, plan


def test_no_case_and_no_prompt_holds_a_scoring_questions_answer(tmp_path: Path):
    policy, plan = policy_and_plan(tmp_path)
    split = plan.split
    hidden = split.scoring()
    assert set(split.static) <= hidden and set(split.confirmation) <= hidden and set(split.test) <= hidden
    assert split.confirmation and split.test
    static = set(split.static)
    # Static questions nearly right (the best success, were they shown), the rest wrong.
    pool = InProcessPool(1, 1, score_of=lambda source, question: 0.9 if question in static else 0.2)
    seeds = [Seed(name, (SEEDS / f"{name}.py").read_text()).candidate() for name in ("vector_search",)]
    policy.start(seeds, None)
    policy.drive(pool)
    assert any(set(job.static_ids) for job in pool.jobs)  # the parents' results do hold the static answers
    items = {item.id: item for item in policy.jobs.task.items}
    shown_questions = {items[q].question for q in items if q not in hidden}
    shown_answers = {items[q].answer for q in items if q not in hidden}
    secret = [items[q] for q in hidden]
    requests = [policy._reflection_request(iteration) for iteration in range(1, 6)]
    for request in requests:
        cases = [*request.failures, *([request.success] if request.success else [])]
        assert cases, "the rotating set gives the reflector cases to learn from"
        assert all(case.question in shown_questions for case in cases)
        assert request.success is None or request.success.score < 0.9
        texts = [request.model_dump_json()] + [
            "\n".join(m["content"] for m in reflection_messages(request, edit_format)) for edit_format in EDIT_FORMATS]
        for text in texts:
            for item in secret:
                assert item.question not in text or item.question in shown_questions, item.id
                if item.answer not in shown_answers and len(item.answer) > 3:
                    assert f"expected: {item.answer}\n" not in text and f'"expected":"{item.answer}"' not in text


def test_sample_cases_leaves_out_the_hidden_questions_whatever_their_scores():
    import random

    from mstar_ray.reflect.request import sample_cases
    from mstar_ray.results import ItemResult

    results = [ItemResult(id=f"s{i}", category="c", question=f"static {i}", expected=f"secret {i}", score=0.0)
               for i in range(20)]
    results += [ItemResult(id="r1", category="c", question="rotating", expected="fine", score=0.5),
                ItemResult(id="r2", category="c", question="rotating right", expected="fine", score=1.0)]
    for seed in range(20):
        failures, success = sample_cases(results, random.Random(seed), hidden={r.id for r in results[:20]})
        assert [case.question for case in failures] == ["rotating"] and success is not None
        assert success.question == "rotating right"
