"""The environment helper process on the real TextWorldExpress engine: games, resets, steps and the expert; a hang,
a crash of the process and a crash of its JVM each become one clear error and the next call gets a fresh process;
an engine that cannot start twice in a row, a missing Java and a missing package name the fix."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mstar_ray.envs.alfworld import FOLDS, data_dir, fold_games
from mstar_ray.envs.base import EnvCrashed, EnvDataMissing, EnvHung, EnvUnavailable, GameSpec
from mstar_ray.envs.env_process import EnvProcess

ROOT = Path(__file__).resolve().parents[1]
TWC = GameSpec(env="textworld_express", game="twc", fold="train", seed=5,
               params="numLocations=1,numItemsToPutAway=2,includeDoors=0,limitInventorySize=0")


@pytest.fixture
def env():
    process = EnvProcess("textworld_express")
    yield process
    process.close()


def play_expert(env: EnvProcess, game: GameSpec) -> list[str]:
    observation = env.reset(game, 30)
    actions = []
    while (action := env.expert_action(30)) is not None:
        assert action in observation.actions
        observation = env.step(action, 30)
        actions.append(action)
    assert observation.done and observation.won
    return actions


def test_games_resets_steps_and_the_expert(env):
    seen, unseen = env.games(TWC, 30), env.games(TWC.model_copy(update={"fold": "test"}), 30)
    assert len(seen) == len(unseen) == 1000 and not set(seen) & set(unseen)
    first = env.reset(TWC, 30)
    assert "pick up objects" in first.goal and first.text.startswith("You are in")
    assert first.actions == sorted(first.actions) and "look around" in first.actions
    assert first.inventory and not first.done
    wrong = env.step("dance wildly", 30)  # an inadmissible action is answered, as the game answers a player
    assert not wrong.done and env.expert_action(30) is None  # off the expert's path, the expert has nothing to say
    again = env.reset(TWC, 30)
    assert again == first  # the same game, afresh
    actions = play_expert(env, TWC)
    assert 3 <= len(actions) <= 8 and actions[-1].startswith("put")
    assert env.started == 1


def test_a_hang_is_killed_at_its_deadline_and_the_next_call_gets_a_fresh_process(env):
    observation = env.reset(TWC, 30)
    hung = env.pid
    os.killpg(hung, signal.SIGSTOP)  # the worker and its JVM stop answering
    with pytest.raises(EnvHung, match="did not answer the action 'inventory' within 2 s; it was killed"):
        env.step(observation.actions[0], 2)
    assert env.pid is None
    with pytest.raises(ProcessLookupError):  # the stopped worker was killed and reaped, not left behind
        os.kill(hung, 0)
    assert play_expert(env, TWC) and env.started == 2


def test_a_process_that_dies_and_an_engine_that_breaks_are_crashes(env):
    observation = env.reset(TWC, 30)
    os.kill(env.pid, signal.SIGKILL)
    # whether the kill has landed when the action is sent is a race: either way the process died under it
    with pytest.raises(EnvCrashed, match=r"its process died (before|during) the action 'inventory' \(exit code -9\)"):
        env.step(observation.actions[0], 10)
    observation = env.reset(TWC, 30)
    jvm = int(Path(f"/proc/{env.pid}/task/{env.pid}/children").read_text().split()[0])
    os.kill(jvm, signal.SIGKILL)
    time.sleep(0.5)
    with pytest.raises(EnvCrashed, match="its engine broke during the action 'inventory': Py4J"):
        env.step(observation.actions[0], 10)
    assert play_expert(env, TWC) and env.started == 3


def test_an_engine_that_cannot_start_twice_means_the_machine_cannot_run_it(monkeypatch):
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xmx1k")  # too little heap for any JVM to initialise
    with EnvProcess("textworld_express") as env:
        with pytest.raises(EnvCrashed, match="the engine could not start"):
            env.reset(TWC, 30)
        with pytest.raises(EnvUnavailable, match="failed to start 2 times in a row, so this machine cannot run it"):
            env.reset(TWC, 30)


def test_a_game_or_parameter_the_engine_refuses_is_bad_input_and_the_process_lives_on(env):
    with pytest.raises(ValueError, match="no game 'nope'; its games are"):
        env.reset(TWC.model_copy(update={"game": "nope"}), 30)
    with pytest.raises(ValueError, match=r"Unrecognized property name \(numLocatons\)"):
        env.reset(TWC.model_copy(update={"params": "numLocatons=2"}), 30)
    with pytest.raises(ValueError, match="expected name=value pairs"):
        env.reset(TWC.model_copy(update={"params": "garbage"}), 30)
    with pytest.raises(ValueError, match="no fold 'valid'"):
        env.games(TWC.model_copy(update={"fold": "valid"}), 30)
    assert env.reset(TWC, 30).actions and env.started == 1


def test_without_java_the_error_names_the_fix(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EnvUnavailable, match="no `java` is on PATH: install a JRE .*openjdk-17-jre-headless"):
        EnvProcess("textworld_express").reset(TWC, 30)


def test_the_worker_ends_with_its_parent():
    """A parent killed outright (no close, no stdin EOF while the worker is stopped) leaves nothing behind."""
    script = ("import sys, json\nfrom mstar_ray.envs.env_process import EnvProcess\nfrom mstar_ray.envs.base import GameSpec\n"
              "env = EnvProcess('textworld_express')\nenv.reset(GameSpec.model_validate_json(sys.argv[1]), 60)\n"
              "print(env.pid, flush=True)\nimport time; time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script, TWC.model_dump_json()], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT)
    worker = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and Path(f"/proc/{worker}").exists():
        time.sleep(0.2)
    assert not Path(f"/proc/{worker}").exists() or "Z" in Path(f"/proc/{worker}/stat").read_text().split()[2]


def _game_tree(root: Path, fold: str, name: str, *, solvable: bool = True, trajectory: bool = True) -> str:
    trial = root / "json_2.1.1" / fold / name / "trial_T1"
    trial.mkdir(parents=True)
    (trial / "game.tw-pddl").write_text(json.dumps({"solvable": solvable}))
    if trajectory:
        (trial / "traj_data.json").write_text("{}")
    return f"json_2.1.1/{fold}/{name}/trial_T1/game.tw-pddl"


def test_alfworld_games_are_listed_as_its_own_loader_lists_them(tmp_path):
    kept = _game_tree(tmp_path, "train", "pick_and_place_simple-Book-None-SideTable-329")
    _game_tree(tmp_path, "train", "pick_and_place_simple-Pan-None-Stove-1", solvable=False)
    _game_tree(tmp_path, "train", "pick_and_place_simple-Sliced-Apple-None-Fridge-3")
    _game_tree(tmp_path, "train", "look_at_obj_in_light-movable-Lamp-2")
    _game_tree(tmp_path, "train", "pick_two_obj_and_place-Cup-None-Shelf-7", trajectory=False)
    assert fold_games(str(tmp_path), "train") == [kept]
    with pytest.raises(EnvDataMissing, match="no solvable ALFWorld game"):
        fold_games(str(tmp_path), "valid_seen")
    with pytest.raises(ValueError, match="no fold 'test'"):
        fold_games(str(tmp_path), "test")
    assert "valid_unseen" in FOLDS


def test_missing_alfworld_data_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(EnvDataMissing, match="alfworld-download"):
        data_dir(None)
    _game_tree(tmp_path, "train", "pick_and_place_simple-Book-None-Desk-1")
    assert data_dir(str(tmp_path)) == tmp_path
