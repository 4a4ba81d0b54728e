"""Two gains found apart are merged: a reflection on one program is offered what a program of another line gained
over their common ancestor (``Population.relatives``, ``ReflectionRequest.relatives``), and the offline reflector
takes it in (``merge_relative``): the relative's lines merged three ways, or, where they conflict, its edit made
again on the parent."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.contract import check_source
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.families.task_registry import load_task
from mstar_ray.program_ast import changed_pieces
from mstar_ray.program_id import program_id
from mstar_ray.reflect.offline import NoMutation, fuse_keyword_scores, reflect, second_read, speaker_date_table
from mstar_ray import line_diff
from mstar_ray.reflect.offline import relatives
from mstar_ray.reflect.offline.relatives import merge_relative, three_way
from mstar_ray.reflect.offline.reflective import WHY
from mstar_ray.reflect.request import LineageEntry, Relative
from mstar_ray.search.population import Member, Population
from tests.conftest import seed_source
from tests.test_policy import make_policy

BASE = "a\nb\nc\nd\ne\nf\n"


def test_the_lines_theirs_changed_are_changed_in_mine_where_mine_kept_them():
    mine = "a\nB\nc\nd\ne\nf\n"  # mine changed b
    theirs = "a\nb\nc\nd\nE\nf\ng\n"  # theirs changed e and added g
    assert three_way(BASE, mine, theirs) == "a\nB\nc\nd\nE\nf\ng\n"


def test_a_line_both_changed_is_a_conflict():
    assert three_way(BASE, "a\nb\nC\nd\ne\nf\n", "a\nb\nX\nd\ne\nf\n") is None
    assert three_way(BASE, "a\nb\nd\ne\nf\n", "a\nb\nc2\nd\ne\nf\n") is None  # mine deleted what theirs changed


def test_blocks_both_inserted_at_one_place_are_both_kept():
    mine, theirs = "a\nb\nmine\nc\nd\ne\nf\n", "a\nb\ntheirs\nc\nd\ne\nf\n"
    assert three_way(BASE, mine, theirs) == "a\nb\nmine\ntheirs\nc\nd\ne\nf\n"


def test_nothing_changed_is_not_merged():
    assert three_way(BASE, "a\nB\nc\nd\ne\nf\n", BASE) is None


def test_a_source_shaped_to_make_the_alignment_costly_gets_a_coarser_one_not_more_work(monkeypatch):
    """Each side's lines each followed by a new one, and a run of one repeated line: the shapes that made difflib's
    matcher run for minutes (``line_diff``). The merge aligns only through ``line_diff.align``, whose work is
    bounded; the result is a merge or a conflict, never a wrong program."""
    aligned: list[int] = []

    def counted(a, b, context=3, *, autojunk=True):
        found = line_diff.align(a, b, context, autojunk=autojunk)
        aligned.append(found.steps)
        return found

    monkeypatch.setattr(relatives, "align", counted)
    base = "".join(f"x{i} = {i}\n" for i in range(3000))
    interleaved = "".join(f"x{i} = {i}\ny{i} = {i}\n" for i in range(3000))
    repeated = "pass\n" * 3000 + base
    for mine, theirs in ((interleaved, repeated), (repeated, interleaved)):
        merged = three_way(base, mine, theirs)
        assert merged is None or merged.startswith("pass\n")
    assert aligned and max(aligned) <= line_diff.MAX_MATCH_STEPS


def relative(base: str, child: str, origin: str, gain: float = 0.05, parent: str | None = None) -> Relative:
    return Relative(id=program_id(child), source=child, origin=origin, parent=parent or program_id(base),
                    commit_message="an edit (why: reasons)", ancestor_id=program_id(base), ancestor_source=base,
                    gain=gain)


def test_two_edits_found_apart_merge_into_the_program_with_both():
    base = seed_source("vector_search")
    fused = fuse_keyword_scores(base, random.Random(0)).source
    hop = second_read(base, random.Random(0)).source
    merged = merge_relative(fused, [relative(base, hop, "mutation:second_read")], random.Random(0))
    assert merged.kind == "merge_relative" and merged.description.startswith("merge in what #")
    assert check_source(merged.source) == []
    assert set(changed_pieces(base, fused)) | set(changed_pieces(base, hop)) <= set(changed_pieces(base, merged.source))
    # and it acts as the program made by the two edits one after the other
    task = load_task("synthetic", seed=0, limit=6)
    both = evaluate(merged.source, task, OfflineBackend(), HashingEmbedder())
    in_turn = evaluate(second_read(fused, random.Random(0)).source, task, OfflineBackend(), HashingEmbedder())
    assert both.violation is None and both.write_errors == 0
    assert [r.context for r in both.results] == [r.context for r in in_turn.results]


def test_a_change_whose_lines_conflict_is_made_again_on_the_parent_when_an_offline_edit_made_it():
    base = seed_source("vector_search")
    fused = fuse_keyword_scores(base, random.Random(0)).source
    table = speaker_date_table(base, random.Random(0)).source
    assert three_way(base, fused, table) is None  # both rewrite read()'s return line
    editors = {"speaker_date_table": lambda rng: speaker_date_table(fused, rng)}
    merged = merge_relative(fused, [relative(base, table, "mutation:speaker_date_table")], random.Random(0),
                            replay=editors.get)
    assert merged.description.startswith("make again here what #")
    assert merged.source == speaker_date_table(fused, random.Random(0)).source
    with pytest.raises(NoMutation, match="no relative"):  # a model's change cannot be made again
        merge_relative(fused, [relative(base, table, "reflection")], random.Random(0), replay=editors.get)
    two_edits = relative(base, table, "mutation:speaker_date_table", parent="f" * 16)  # its last edit is not all
    with pytest.raises(NoMutation, match="no relative"):
        merge_relative(fused, [two_edits], random.Random(0), replay=editors.get)


def member(id_: str, score: float, parent: str | None = None, source: str = "") -> Member:
    return Member(id=id_, source=source or id_, parent=parent, origin="seed" if parent is None else "reflection",
                  commit_message=id_, iteration=0, score=score)


def test_relatives_are_programs_of_another_line_that_gained_over_the_ancestor_they_share():
    population = Population()
    for m in (member("seed", 0.30), member("fused", 0.40, "seed"), member("table", 0.36, "seed"),
              member("worse", 0.25, "seed"), member("fused_more", 0.45, "fused"), member("table_more", 0.33, "table"),
              member("other_seed", 0.50)):
        population.add(m)
    found = population.relatives("fused", population.members)
    # ``table`` and ``table_more`` gained over ``seed``; not ``worse``, nor fused's ancestor, descendant or other seed
    assert [(r.id, a.id) for r, a in found] == [("table", "seed"), ("table_more", "seed")]
    assert [(r.id, a.id) for r, a in population.relatives("fused_more", population.members)] == [
        ("table", "seed"), ("table_more", "seed")]
    assert population.relatives("seed", population.members) == []


def test_a_reflection_is_offered_its_parents_relatives_and_the_offline_reflector_merges_them_first():
    base = seed_source("vector_search")
    fused = fuse_keyword_scores(base, random.Random(0)).source
    hop = second_read(base, random.Random(0)).source
    offered = [relative(base, hop, "mutation:second_read")]
    kinds = [reflect(fused, [], random.Random(s), relatives=offered).kind for s in range(24)]
    assert kinds.count("merge_relative") > 12
    assert "merge_relative" not in [reflect(fused, [], random.Random(s)).kind for s in range(24)]
    # a merge that did not gain on this parent is not proposed again
    merged = reflect(fused, [], random.Random(0), relatives=offered)
    tried = LineageEntry(id="c" * 16, relation="child", commit_message=merged.description, score=0.1, delta=-0.01)
    again = [reflect(fused, [], random.Random(s), relatives=offered, lineage=[tried]) for s in range(24)]
    assert all(m.description.split(WHY)[0] != merged.description.split(WHY)[0] for m in again)


def test_the_policy_offers_what_another_line_gained(tmp_path: Path):
    policy, _ = make_policy(tmp_path, parent_selection="greedy")
    population = policy.state.population
    base = seed_source("vector_search")
    fused = fuse_keyword_scores(base, random.Random(0)).source
    hop = second_read(base, random.Random(0)).source
    seed = member(program_id(base), 0.30, source=base)
    for m in (seed, member(program_id(fused), 0.50, seed.id, fused), member(program_id(hop), 0.40, seed.id, hop)):
        population.add(m)
    request = policy._reflection_request(1)
    assert request.parent_id == program_id(fused)
    assert [(r.id, r.parent, r.ancestor_id, r.ancestor_source, r.source) for r in request.relatives] == [
        (program_id(hop), seed.id, seed.id, base, hop)]
    assert request.relatives[0].gain == pytest.approx(0.10)
