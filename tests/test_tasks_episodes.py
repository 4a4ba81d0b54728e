"""The episode tasks on the real TextWorldExpress engine: folds and roles, seen and unseen, the expert
transcripts, stable ids, determinism across processes, the options, and what is said when ALFWorld is missing."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mstar_ray.envs.base import EnvUnavailable, EpisodeSpec
from mstar_ray.envs.env_process import shared
from mstar_ray.envs.transcript import opening
from mstar_ray.families.task_registry import load_task, task_options

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"train_games": 8, "validation_games": 6, "test_games": 4}


@pytest.fixture(scope="module")
def twc():
    return load_task("twc", **SMALL)


def fold_of(item) -> str:
    return EpisodeSpec.model_validate(item.spec).game.fold


def test_roles_folds_and_categories(twc):
    assert twc.family == "episode" and len(twc.texts) == 8 and len(twc.items) == 6 + 4 + 4
    test = set(twc.test_ids)
    validation = [i for i in twc.items if i.id not in test]
    assert len(validation) == 6 and all(i.category == "seen" and fold_of(i) == "train" for i in validation)
    tested = [i for i in twc.items if i.id in test]
    assert sorted((i.category, fold_of(i)) for i in tested) == [("seen", "train")] * 4 + [("unseen", "test")] * 4
    games = [t.id for t in twc.texts] + [i.id for i in twc.items]
    assert len(set(games)) == len(games)  # no game plays two roles
    assert all(t.id.startswith("twc-train-") for t in twc.texts)
    assert all(i.id == f"twc-{fold_of(i)}-{EpisodeSpec.model_validate(i.spec).game.seed}" for i in twc.items)


def test_texts_are_the_experts_transcripts_and_items_start_from_their_opening(twc):
    for text in twc.texts:
        lines = text.text.splitlines()
        assert lines[0].startswith("OBJECTIVE: Your task is to pick up objects")
        assert lines[1].startswith("OBSERVATION: You are in")
        assert lines[-1].startswith("OUTCOME: success after")
        assert [line.split(": ", 1)[0] for line in lines[2:-1]] == ["ACTION", "OBSERVATION"] * ((len(lines) - 3) // 2)
    env = shared("textworld_express")
    for item in twc.items:
        spec = EpisodeSpec.model_validate(item.spec)
        assert spec.step_limit == 12 and spec.step_timeout_s == 30
        first = env.reset(spec.game, 30)
        assert item.question == opening(first.goal, first.text)
        gold = []
        while (action := env.expert_action(30)) is not None:
            gold.append(action)
            env.step(action, 30)
        assert item.answer == f"success within 12 actions (an expert won in {len(gold)}: {'; '.join(gold)})"


def test_unseen_games_hold_objects_the_seen_ones_do_not():
    task = load_task("twc", train_games=30, validation_games=1, test_games=30)

    def objects(texts: list[str]) -> set[str]:
        return {taken.strip() for text in texts for taken in re.findall(r"\btake ([^;)\n]+)", text)}

    seen = objects([t.text for t in task.texts])
    unseen = objects([i.answer for i in task.items if i.category == "unseen"])
    assert len(seen) > 10 and len(unseen) > 10
    assert len(unseen & seen) < 0.5 * len(unseen)


def _digest(options: str) -> str:
    script = ("import hashlib, json, sys\nfrom mstar_ray.families.task_registry import load_task\n"
              f"task = load_task('twc', **{options})\nprint(hashlib.sha256(task.model_dump_json().encode()).hexdigest())")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_task_is_the_same_in_every_process_and_another_seed_draws_other_games(twc):
    here = hashlib.sha256(twc.model_dump_json().encode()).hexdigest()
    assert _digest(repr(SMALL)) == here
    other = load_task("twc", seed=1, **SMALL)
    assert {i.id for i in other.items} != {i.id for i in twc.items}


def test_options_limit_steps_params_and_sizes(twc):
    limited = load_task("twc", limit=5, **SMALL)
    assert len(limited.items) == 5 and set(limited.test_ids) <= {i.id for i in limited.items}
    assert {i.category for i in limited.items} == {"seen", "unseen"}
    bigger = load_task("twc", game_params="numLocations=1,numItemsToPutAway=3,includeDoors=0,limitInventorySize=0",
                       step_limit=20, step_timeout_s=5, train_games=2, validation_games=2, test_games=1)
    spec = EpisodeSpec.model_validate(bigger.items[0].spec)
    assert (spec.step_limit, spec.step_timeout_s, spec.game.params.count("numItemsToPutAway=3")) == (20, 5, 1)
    with pytest.raises(ValueError, match="numLocatons"):
        load_task("twc", game_params="numLocatons=2", **SMALL)
    with pytest.raises(ValueError, match="twc, fold train: 1200 games wanted but only 1000 exist"):
        load_task("twc", train_games=1000, validation_games=100, test_games=100)
    with pytest.raises(ValueError):
        task_options(name="twc", train_games=0)


@pytest.mark.parametrize("game", ["cookingworld", "coin"])
def test_the_other_games_load_the_same_way(game):
    task = load_task(game, train_games=3, validation_games=2, test_games=2)
    assert task.name == game and len(task.texts) == 3 and len(task.items) == 6 and len(task.test_ids) == 4
    assert all(t.text.splitlines()[-1].startswith("OUTCOME: success") for t in task.texts)
    assert {i.category for i in task.items} == {"seen", "unseen"}


def test_alfworld_without_its_package_names_the_fix():
    with pytest.raises(EnvUnavailable, match=r"ALFWorld is not installed: pip install 'alfworld>=0.3'.*ALFWORLD_DATA"):
        load_task("alfworld")
