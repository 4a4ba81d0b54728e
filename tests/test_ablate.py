"""``mstar-ray ablate``: each variant is the config with one switch changed and the repeat's search seed; the
table pools test questions over repeats and pairs each variant with best-of-N on the same questions; a
best-of-N search only ever reflects on seeds; a real ablation on a local Ray writes a run per variant and
repeat, and given again keeps the runs it finished."""

from __future__ import annotations

import random

import pytest
import yaml

from mstar_ray.cli import main
from mstar_ray.driver.ablate import TABLE, VARIANTS, RunScores, render, table, variant_config
from mstar_ray.run_config import RunConfig, load_run_config
from mstar_ray.search.parents import SeedsOnly
from mstar_ray.search.population import Member, Population
from mstar_ray.runlog.reader import read_table
from tests.conftest import SEEDS


def test_a_variant_changes_its_switch_and_the_search_seed_only(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"search": {"seeds": ["vector_search", "../seedfile.py"], "seed": 5,
                                               "max_candidates": 7}}))
    (tmp_path.parent / "seedfile.py").write_text((SEEDS / "experience_learner.py").read_text())
    config = load_run_config(path)
    for name, switch in VARIANTS.items():
        own = variant_config(config, path, name, 2)
        assert own.search.seed == 7 and own.search.max_candidates == 7
        assert own.search.seeds[0] == "vector_search" and own.search.seeds[1] == str((tmp_path.parent / "seedfile.py"))
        for key, value in switch.items():
            assert getattr(own.search, key) == value
        changed = {k for k, v in own.search.model_dump().items() if v != config.search.model_dump()[k]}
        assert changed <= {"seed", "seeds", *switch}


def test_best_of_n_reflects_only_on_seeds():
    population = Population()
    member = lambda id, origin, parent, score: Member(id=id, source=id, origin=origin, parent=parent, score=score,
                                                      commit_message="", iteration=0)
    population.add(member("s1", "seed", None, 0.1))
    population.add(member("s2", "seed", None, 0.2))
    population.add(member("c1", "reflection", "s2", 0.9))
    rng = random.Random(0)
    rule = SeedsOnly()
    assert {rule.choose(population, rng).id for _ in range(50)} == {"s1", "s2"}
    assert {m.id for m in rule.donors(population)} == {"s1", "s2"}  # crossed over only with seeds
    assert RunConfig.model_validate({"search": {"parent_selection": "seeds"}}).search.parent_selection == "seeds"


def scores(variant: str, repeat: int, values: list[float], origin: str = "reflection") -> RunScores:
    return RunScores(variant=variant, repeat=repeat, run_dir="-", best_origin=origin, evaluations=10,
                     test={f"q{i}": v for i, v in enumerate(values)}, seed_test={f"q{i}": 0.2 for i in range(len(values))})


def test_the_table_pools_repeats_and_pairs_with_best_of_n():
    runs = [scores("full", 0, [1.0] * 20), scores("full", 1, [1.0] * 10 + [0.0] * 10),
            scores("best-of-N", 0, [0.0] * 20, "seed"), scores("best-of-N", 1, [0.0] * 20, "seed")]
    rows = {r["variant"]: r for r in table(runs)}
    assert set(rows) == {"full", "best-of-N"}
    full = rows["full"]
    assert full["test"] == pytest.approx(0.75) and full["evolved"] == 2 and full["evaluations"] == 20
    assert full["interval"][0] < 0.75 < full["interval"][1]
    assert full["vs_best_of_n"] == pytest.approx(0.75) and full["vs_best_of_n_interval"][0] > 0
    assert "vs_best_of_n" not in rows["best-of-N"] and rows["best-of-N"]["evolved"] == 0
    assert "best-of-N" in render(table(runs))


def test_an_unknown_variant_is_bad_input(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"search": {"max_candidates": 1}}))
    assert main(["ablate", str(path), "--variants", "full,nope", "--out", str(tmp_path / "out")]) == 2
    assert "nope" in capsys.readouterr().err


def test_a_real_ablation_runs_each_variant_and_keeps_finished_runs(tmp_path, capsys):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({
        "task": {"name": "synthetic", "seed": 0, "limit": 12},
        "split": {"static_size": 4, "rotating_size": 1, "confirmation_size": 0, "train_ratio": 1.0},
        "search": {"seeds": ["vector_search", "experience_learner"], "max_candidates": 2, "reflections_in_flight": 1,
                   "evaluations_in_flight": 1},
        "ray": {"num_cpus": 1}}))
    out = tmp_path / "out"
    args = ["ablate", str(path), "--variants", "full,best-of-n", "--repeats", "1", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "full" in printed and "best-of-N" in printed
    assert (out / TABLE).is_file() and (out / "full-0" / "summary.json").is_file()
    # best-of-N's children are all children of seeds
    candidates = read_table(out / "best-of-n-0", "candidates").to_pylist()
    seeds = {c["id"] for c in candidates if c["origin"] == "seed"}
    assert all(c["parent"] in seeds for c in candidates if c["origin"] != "seed")
    finished = (out / "full-0" / "summary.json").stat().st_mtime_ns
    assert main(args) == 0  # nothing left to run: the table again from the finished runs
    assert (out / "full-0" / "summary.json").stat().st_mtime_ns == finished
