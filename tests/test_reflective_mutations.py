"""The offline reflector reflects: the stage its parent's failures are attributed to decides where it edits
(storage -> write(), retrieval -> read()), a change that failed on that parent is never proposed again, the
blind proposer stays as an ablation; and the edits it adds (dated lines, keyword fusion, a cap per source)
give programs that run in the real sandbox and do what they say."""

from __future__ import annotations

import ast
import random
from collections import Counter

import pytest

from mstar_ray import text as tx
from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.contract import check_source
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.program_ast import changed_pieces
from mstar_ray.program_id import program_id
from mstar_ray.reflect.offline import (
    MAX_LINE_WORDS, MAX_PER_SOURCE, NoMutation, cap_per_source, date_aware_writes, failed_changes, fuse_keyword_scores, reflect, second_read,
    write_per_line,
)
from mstar_ray.reflect.offline.hops import _asks_model
from mstar_ray.reflect.offline.reflective import WHY, _names_used
from mstar_ray.reflect.offline.guided import OfflineReflector
from mstar_ray.reflect.offline.blind import RandomOfflineReflector
from mstar_ray.reflect.reflector import Child, Discard
from mstar_ray.reflect.request import Case, LineageEntry, ReflectionRequest, inert_parts
from mstar_ray.reflect.smoke import smoke_test
from mstar_ray.run_config import RunConfig
from mstar_ray.seeds import LIBRARY, PAPER_SEEDS
from mstar_ray.families.task_registry import load_task
from tests.conftest import seed_source

DRAWS = 24


def cases(stage: str | None, n: int = 3, **fields) -> list[Case]:
    base = {"question": "What does Umar do for a living?", "expected": "translator", "prediction": "I don't know",
            "score": 0.0, "stage": stage, "context": "Umar: Morning Mirela!"}
    return [Case(**(base | fields)) for _ in range(n)]


def touches(parent: str, child: str, method: str) -> bool:
    """Whether the child changes ``method`` or a constant or helper it uses."""
    import ast

    used = _names_used(ast.parse(parent), method) | _names_used(ast.parse(child), method)
    return any(piece == f"KnowledgeBase.{method}" or piece in used for piece in changed_pieces(parent, child))


@pytest.mark.parametrize("name", sorted(PAPER_SEEDS))
def test_failures_at_storage_get_an_edit_of_what_write_keeps(name):
    parent = seed_source(name)
    children = [reflect(parent, [parent], random.Random(s), failures=cases("storage")) for s in range(DRAWS)]
    assert sum(touches(parent, c.source, "write") for c in children) >= 0.75 * DRAWS
    assert Counter(c.kind for c in children).most_common(1)[0][0] == "date_aware_writes"
    assert all("storage" in c.description.split(WHY, 1)[1] for c in children)


@pytest.mark.parametrize("name", sorted(PAPER_SEEDS))
def test_failures_at_retrieval_get_an_edit_of_how_read_finds_and_ranks(name):
    parent = seed_source(name)
    children = [reflect(parent, [parent], random.Random(s), failures=cases("retrieval")) for s in range(DRAWS)]
    assert sum(touches(parent, c.source, "read") for c in children) >= 0.75 * DRAWS
    assert sum(not touches(parent, c.source, "write") for c in children) >= 0.75 * DRAWS


def test_the_parents_stage_counts_outweigh_the_sampled_cases():
    parent = seed_source("vector_search")
    children = [reflect(parent, [parent], random.Random(s), failures=cases("retrieval", 1),
                        stage_counts={"storage": 9, "retrieval": 1}) for s in range(DRAWS)]
    assert sum(touches(parent, c.source, "write") for c in children) > DRAWS / 2


def test_unattributed_failures_are_read_from_their_context():
    parent = seed_source("experience_learner")
    # the expected answer stands in the context: the memory found it and the answer was still wrong
    answered = cases(None, context="Umar: That's life as a translator, I suppose.")
    children = [reflect(parent, [parent], random.Random(s), failures=answered) for s in range(DRAWS)]
    assert Counter(c.kind for c in children).most_common(1)[0][0] == "edit_instruction"


def test_a_when_question_without_a_date_in_its_context_asks_for_dated_items():
    parent = seed_source("vector_search")
    when = cases("retrieval", question="When did Umar adopt a cat?", expected="12 May 2021")
    plain = cases("retrieval")
    dated = lambda failures: sum(reflect(parent, [parent], random.Random(s), failures=failures).kind == "date_aware_writes"
                                 for s in range(DRAWS))
    assert dated(when) > dated(plain)


def test_a_change_that_failed_on_the_parent_is_never_proposed_again():
    parent = seed_source("vector_search")
    first = next(c for s in range(DRAWS) if (c := reflect(parent, [parent], random.Random(s), failures=cases("storage"))).kind
                 == "date_aware_writes")
    failed = LineageEntry(id=program_id(first.source), relation="child", commit_message=first.description,
                          score=0.2, delta=-0.03)
    assert failed_changes([failed]) and not failed_changes([failed.model_copy(update={"delta": 0.04})])
    again = [reflect(parent, [parent], random.Random(s), failures=cases("storage"), lineage=[failed])
             for s in range(DRAWS)]
    assert all(c.source != first.source for c in again)
    assert all(c.kind != "date_aware_writes" for c in again)
    # an evaluation that never scored (screened out, failed) counts as failed too; a gain does not
    unscored = failed.model_copy(update={"score": None, "delta": None})
    assert all(reflect(parent, [parent], random.Random(s), failures=cases("storage"), lineage=[unscored]).source
               != first.source for s in range(DRAWS))
    gained = failed.model_copy(update={"delta": 0.04})
    assert any(reflect(parent, [parent], random.Random(s), failures=cases("storage"), lineage=[gained]).source
               == first.source for s in range(DRAWS))


def test_when_every_change_failed_there_is_no_child():
    parent = seed_source("vector_search")
    lineage, rng = [], random.Random(0)
    with pytest.raises(NoMutation):
        for _ in range(400):  # the parent's edits are finitely many
            child = reflect(parent, [parent], rng, failures=cases("storage"), lineage=lineage, frozen_code=True)
            lineage.append(LineageEntry(id=program_id(child.source), relation="child",
                                        commit_message=child.description, score=0.1, delta=-0.1))


def test_parts_a_child_changed_without_moving_the_score_are_edited_last():
    parent = seed_source("experience_learner")
    answering = cases("answering")
    first = [reflect(parent, [parent], random.Random(s), failures=answering) for s in range(DRAWS)]
    assert Counter(c.kind for c in first).most_common(1)[0][0] == "edit_instruction"
    # a child that reworded one prompt and scored exactly what the parent scored: the agent ignores prompts
    prompts = ["INSTRUCTION_KNOWLEDGE_ITEM", "INSTRUCTION_QUERY", "INSTRUCTION_RESPONSE", "ALWAYS_ON_KNOWLEDGE"]
    no_effect = LineageEntry(id="c" * 16, relation="child", commit_message="reword the response prompt",
                             score=0.3, delta=0.0, changed=["INSTRUCTION_RESPONSE"])
    after = [reflect(parent, [parent], random.Random(s), failures=answering, lineage=[no_effect])
             for s in range(DRAWS)]
    assert all(not set(changed_pieces(parent, c.source)) <= set(prompts) for c in after)
    # a child that moved the score, even down, says the part matters: it is edited again
    moved = no_effect.model_copy(update={"delta": -0.01})
    again = [reflect(parent, [parent], random.Random(s), failures=answering, lineage=[moved]) for s in range(DRAWS)]
    assert any(c.kind == "edit_instruction" for c in again)
    # and when nothing else may change, an inert part is still edited rather than nothing
    only_prompts = reflect(parent, [parent], random.Random(0), failures=answering, lineage=[no_effect],
                           frozen_code=True)
    assert only_prompts.kind == "edit_instruction"


@pytest.mark.parametrize("kind, stage, crowded", [
    ("drop_long_lines", "answering", "Umar: " + " ".join(["word"] * (MAX_LINE_WORDS + 5))),
    ("cap_per_source", "retrieval", "\n".join(f"[3 May 2023]\nUmar: line {i}" for i in range(MAX_PER_SOURCE + 2))),
])
def test_a_filter_that_would_change_none_of_the_failures_contexts_is_proposed_last(kind, stage, crowded):
    parent = seed_source("vector_search")
    plain = "[3 May 2023]\nUmar: Morning Mirela!\nMirela: Morning! How is the new job?"

    def drawn(context: str) -> Counter[str]:
        failures = cases(stage, context=context)
        return Counter(reflect(parent, [parent], random.Random(s), failures=failures).kind for s in range(4 * DRAWS))

    # tried on the contexts the failures were read with: a filter that keeps all of them is not where they come from
    assert drawn(crowded)[kind] > 0 and drawn(plain)[kind] == 0


def test_what_children_across_the_run_changed_without_effect_is_a_lesson_for_every_parent():
    def child(changed: list[str], delta: float) -> LineageEntry:
        return LineageEntry(id="c" * 16, relation="child", commit_message="x", score=0.3, delta=delta, changed=changed)

    still, prompt = child(["TOP_K"], 0.0), child(["INSTRUCTION_QUERY"], 0.0)
    prompts = {"INSTRUCTION_KNOWLEDGE_ITEM", "INSTRUCTION_QUERY", "INSTRUCTION_RESPONSE", "ALWAYS_ON_KNOWLEDGE"}
    assert inert_parts([still]) == {"TOP_K"} and inert_parts([still], at_least=2) == set()
    assert inert_parts([still, still], at_least=2) == {"TOP_K"}
    # a part that a child changed with its score moving, even down, matters
    assert inert_parts([still, still, child(["TOP_K", "KnowledgeBase.read"], -0.01)], at_least=2) == set()
    # the four prompts are one part: two rewordings of two prompts are two changes of it
    assert inert_parts([prompt, child(["INSTRUCTION_RESPONSE"], 0.0)], at_least=2) == prompts
    # the offline reflector: a parent with no history of its own defers what the run found inert
    parent = seed_source("experience_learner")
    answering = cases("answering")
    first = Counter(reflect(parent, [parent], random.Random(s), failures=answering).kind for s in range(DRAWS))
    after = Counter(reflect(parent, [parent], random.Random(s), failures=answering, run_inert=prompts).kind
                    for s in range(DRAWS))
    assert first["edit_instruction"] > 0 and after["edit_instruction"] == 0


def test_the_frozen_parts_hold():
    parent = seed_source("experience_learner")
    for s in range(DRAWS):
        assert reflect(parent, [parent], random.Random(s), failures=cases("storage"), frozen_code=True).kind == "edit_instruction"
        assert reflect(parent, [parent], random.Random(s), failures=cases("answering"),
                       frozen_instructions=True).kind != "edit_instruction"


def request(parent: str, **overrides) -> ReflectionRequest:
    return ReflectionRequest(parent_id=program_id(parent), parent_source=parent, parent_score=0.3, **overrides)


def test_the_reflector_does_not_offer_again_what_its_check_refused():
    parent = seed_source("vector_search")
    offered: list[str] = []

    def refuse(source: str) -> str:
        offered.append(source)
        return "refused by the test's smoke check"

    result = OfflineReflector(max_repairs=3).reflect(request(parent, failures=cases("storage"), seed=3), refuse)
    assert isinstance(result, Discard) and result.attempts == 4
    assert len(offered) == 4 and len(set(offered)) == 4


def test_offline_reflects_and_offline_random_is_blind():
    parent, donors = seed_source("vector_search"), [seed_source("experience_learner")]
    smoke = lambda source: smoke_test(source, HashingEmbedder())
    reflective, blind = OfflineReflector(), RandomOfflineReflector()
    kinds = {True: Counter(), False: Counter()}
    for s in range(8):
        for is_reflective, reflector in ((True, reflective), (False, blind)):
            child = reflector.reflect(request(parent, failures=cases("storage"), donors=donors, seed=s), smoke)
            assert isinstance(child, Child)
            kinds[is_reflective][child.origin] += 1
    assert kinds[True]["mutation:date_aware_writes"] > kinds[False]["mutation:date_aware_writes"]
    assert RunConfig.model_validate({"search": {"reflector": "offline-random"}}).search.reflector == "offline-random"


@pytest.mark.parametrize("edit", [date_aware_writes, write_per_line, fuse_keyword_scores, cap_per_source,
                                  second_read])
def test_every_new_edit_applies_to_every_seed_of_the_library_once(edit):
    for seed in LIBRARY:
        source = seed.path.read_text(encoding="utf-8")
        if edit is second_read and _asks_model(ast.parse(source)):
            with pytest.raises(NoMutation, match="toolkit model"):  # one toolkit call per read(): not read twice
                edit(source, random.Random(0))
            continue
        child = edit(source, random.Random(0)).source
        assert check_source(child) == [] and child != source
        with pytest.raises(NoMutation):
            edit(child, random.Random(0))


def test_dated_writes_put_the_date_on_every_piece_read_returns():
    task = load_task("synthetic", seed=0, limit=6)
    parent = seed_source("vector_search")
    child = fuse_keyword_scores(date_aware_writes(parent, random.Random(0)).source, random.Random(0)).source
    assert "TOP_K = 15" in child  # fusion fetches three times as many to choose from
    before = evaluate(parent, task, OfflineBackend(), HashingEmbedder())
    after = evaluate(child, task, OfflineBackend(), HashingEmbedder())
    assert before.violation is None and after.violation is None
    # a chunk of the parent cut from the middle of a session has no date; every chunk of the child has one
    # (but the last, which read()'s cap may cut short)
    undated = lambda report: [line for r in report.results for line in r.context.split("\n")[:-1] if line.strip()
                              and not tx.find_dates(line)]
    assert undated(before) and not undated(after)


def test_a_program_keyed_by_line_reads_turns_not_whole_texts():
    task = load_task("synthetic", seed=0, limit=6)
    parent = seed_source("vector_search")
    child = write_per_line(parent, random.Random(0)).source
    assert "def write_line(" in child and check_source(child) == []
    report = evaluate(child, task, OfflineBackend(), HashingEmbedder())
    assert report.violation is None and report.write_errors == 0
    # each entry read() returns is one turn under its date (the parent's chunks hold several turns)
    entries = [e for r in report.results for e in r.context.split("\n\n") if e]
    assert entries and all("\n" not in e and e.startswith("[") and "] " in e for e in entries)
