"""Each task has its own options: a key its task does not read is refused with the nearest key that task has,
in a run config and on eval's command line; a run directory's config from the one flat options model still
loads."""

from __future__ import annotations

import pytest
import yaml

from mstar_ray.cli import main
from mstar_ray.config_file import ConfigError
from mstar_ray.run_config import load_run_config
from mstar_ray.families.task_options import FLAT_KEYS, TwcOptions
from mstar_ray.families.task_registry import TASK_NAMES, options_model
from tests.conftest import SEEDS


def _config(tmp_path, task: dict) -> str:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"task": task}))
    return str(path)


@pytest.mark.parametrize("task, expected", [
    ({"name": "synthetic", "data": "x"}, "task.data: unknown key; valid keys: granularity, limit, name, personas,"),
    ({"name": "locomo", "conversatoin": 1}, "task.conversatoin: unknown key; did you mean 'conversation'?"),
    ({"name": "twc", "granularity": "turn"}, "task.granularity: unknown key; valid keys: game_params, limit, name, seed,"),
    ({"name": "healthbench", "data": "x.jsonl", "train_shares": 0.3}, "task.train_shares: unknown key; did you mean 'train_share'?"),
    ({"name": "synthetik"}, "task: unknown 'synthetik'; valid: 'locomo', 'synthetic'"),
    ({"name": "beam"}, "task beam needs data"),
    ({"name": "twc", "train_games": 0}, "task.train_games: Input should be greater than 0"),
])
def test_an_option_its_task_does_not_read_is_refused_naming_the_key(tmp_path, task, expected):
    with pytest.raises(ConfigError) as refused:
        load_run_config(_config(tmp_path, task))
    assert expected in str(refused.value)


def test_no_name_is_the_synthetic_task_and_each_task_gets_its_own_model(tmp_path):
    assert load_run_config(_config(tmp_path, {"seed": 3})).task == options_model("synthetic")(seed=3)
    config = load_run_config(_config(tmp_path, {"name": "coin", "step_limit": 9}))
    assert type(config.task) is options_model("coin") and config.task.step_limit == 9


def test_a_run_directorys_flat_task_section_from_before_still_loads(tmp_path):
    # what the flat model wrote into every config.yaml: all sixteen keys, whatever the task
    flat = {"name": "twc", "seed": 2, "conversation": 0, "data": None, "size": "100K", "limit": None,
            "categories": None, "train_share": 0.5, "only_categories": None, "granularity": "session",
            "train_games": 12, "validation_games": 10, "test_games": 4, "game_params": None, "step_limit": None,
            "step_timeout_s": 30.0}
    assert set(flat) == FLAT_KEYS
    assert load_run_config(_config(tmp_path, flat)).task == TwcOptions(seed=2, train_games=12, validation_games=10,
                                                                      test_games=4)
    with pytest.raises(ConfigError, match="task.conversation: unknown key"):  # not a record: a user's section
        load_run_config(_config(tmp_path, {k: flat[k] for k in ("name", "seed", "conversation")}))


def test_every_tasks_options_were_options_of_the_flat_model():
    # the synthetic world's size came after the flat model (a run directory from before has none of them)
    added = {"synthetic": {"sessions", "personas", "questions_per_category"}}
    for name in TASK_NAMES:
        assert set(options_model(name).model_fields) <= FLAT_KEYS | added.get(name, set()), name


def test_eval_refuses_a_flag_its_task_does_not_read_with_exit_2(capsys):
    program = str(SEEDS / "vector_search.py")
    assert main(["eval", program, "--task", "synthetic", "--conversation", "1", "--limit", "2"]) == 2
    assert "conversation: unknown key" in capsys.readouterr().err
