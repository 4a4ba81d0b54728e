"""The actor step's rules (reading actions out of text, likeness by words, the exploration, a model's reply matched to
an action) and, on real TextWorldExpress games with real sandboxes, that the offline actor makes memory matter."""

from __future__ import annotations

import pytest

from mstar_ray.families.episode.actions import explore, match_reply, named_actions, similarity, words
from mstar_ray.agent.evaluation import evaluate
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.families.episode.offline import act
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.envs.base import EpisodeSpec
from mstar_ray.envs.env_process import shared
from mstar_ray.families.episode.turn import Turn
from mstar_ray.families.step import Shown
from mstar_ray.families.episode.games import Roles, episode_task
from mstar_ray.families.task_registry import load_task
from tests.conftest import seed_source

TRANSCRIPT = """OBJECTIVE: Your task is to pick up objects, then place them in their usual locations in the environment.
OBSERVATION: You are in the laundry room. In one part of the room you see a bench. There is also a dirty teal dress.
ACTION: take dirty teal dress
OBSERVATION: You take the dirty teal dress.
ACTION: put dirty teal dress in laundry basket
OBSERVATION: You put the dirty teal dress in the laundry basket.
OUTCOME: success after 2 actions"""


def turn(actions, history=()):
    return Turn(goal="put things away", observation="You are in the laundry room.", inventory=None,
                history=tuple(history), actions=tuple(sorted(actions)))


def test_actions_are_read_from_transcripts_from_chunks_and_from_notes():
    verbs = frozenset({"take", "put", "open"})
    assert named_actions(TRANSCRIPT, verbs) == ["take dirty teal dress", "put dirty teal dress in laundry basket"]
    chunk = " ".join(TRANSCRIPT.split())  # a chunker that joins words with spaces loses the lines
    assert named_actions(chunk, verbs) == named_actions(TRANSCRIPT, verbs)
    note = "Lessons:\nput dirty clothes in the laundry basket. Open the fridge first; the room was dark."
    assert named_actions(note, verbs) == ["put dirty clothes in the laundry basket", "Open the fridge first"]


def test_likeness_needs_the_verb_and_every_slot():
    assert similarity("take coin", "take coin") == 1.0
    assert similarity("put dirty teal dress in laundry basket", "put dirty green T-shirt in laundry basket") > 0.3
    assert similarity("put picture in chest of drawers", "put plaid blanket in chest of drawers") == 0.0
    assert similarity("move east", "move west") == 0.0 and similarity("open fridge", "take fridge") == 0.0
    assert words("go to cabinet 1") == ("go", (frozenset(), frozenset({"cabinet", "1"})))


def test_the_actor_replays_what_memory_shows_in_its_order_and_never_repeats():
    actions = ["inventory", "look around", "open washing machine", "take dirty teal dress", "take wet cap"]
    assert act(Shown("", "", TRANSCRIPT), turn(actions)).action == "take dirty teal dress"
    later = ["inventory", "look around", "put dirty teal dress in bench", "put dirty teal dress in laundry basket",
             "take wet cap"]
    step = turn(later, history=[("take dirty teal dress", "You take the dirty teal dress.")])
    assert act(Shown("", "", TRANSCRIPT), step).action == "put dirty teal dress in laundry basket"
    # nothing in memory is like an untried action: the fixed exploration (untried, by verb order)
    assert act(Shown("", "", ""), turn(actions)).action == "take dirty teal dress"
    assert act(Shown("", "", ""), turn(actions, [("take dirty teal dress", "")])).action == "take wet cap"


def test_exploration_takes_the_containers_memory_used_first():
    actions = ["put wet cap in bench", "put wet cap in laundry basket", "put wet cap in work table"]
    assert explore(turn(actions)) == "put wet cap in bench"  # alphabetical without a memory
    assert act(Shown("", "", TRANSCRIPT), turn(actions)).action == "put wet cap in laundry basket"


def test_a_models_reply_is_matched_to_an_admissible_action():
    actions = ("go to cabinet 1", "go to cabinet 2", "open drawer 1", "take apple 1 from table 1")
    assert match_reply("Go to cabinet 2.", actions) == ("go to cabinet 2", "exact")
    assert match_reply("Action: > open drawer 1", actions) == ("open drawer 1", "exact")
    assert match_reply("I think I should open drawer 1 now", actions) == ("open drawer 1", "named")
    assert match_reply("take the apple from the table", actions) == ("take apple 1 from table 1", "words")
    assert match_reply("You go to the cabinet 2.", actions) == ("go to cabinet 2", "words")
    assert match_reply("I am not sure.", actions) == (None, "none")
    assert match_reply("", actions) == (None, "none")


@pytest.fixture(scope="module")
def twc():
    return load_task("twc", train_games=30, validation_games=40, test_games=40)


def success(source, task):
    report = evaluate(source, task, OfflineBackend(), HashingEmbedder())
    assert report.violation is None
    return report


NOTHING = seed_source("vector_search").replace('        if self.count == 0:\n            return ""', '        return ""')


def test_memory_matters_the_seeds_differ_and_an_empty_memory_does_worse(twc):
    empty = success(NOTHING, twc)
    learner = success(seed_source("experience_learner"), twc)
    vector = success(seed_source("vector_search"), twc)
    assert learner.score > empty.score + 0.1
    assert learner.categories["seen"].score > empty.categories["seen"].score + 0.1
    assert learner.categories["unseen"].score > empty.categories["unseen"].score
    assert vector.score < learner.score - 0.1  # its 500-character chunks retrieve rooms, not actions


def test_a_memory_holding_each_games_own_expert_run_wins_nearly_every_game():
    """Texts written: the expert transcripts of the very games played. A memory that returns the right one makes
    the offline actor replay it; an empty memory leaves it to the exploration."""
    seen = load_task("twc", train_games=1, validation_games=12, test_games=0)
    games = [(item.id, EpisodeSpec.model_validate(item.spec).game) for item in seen.items]
    task = episode_task("twc", shared("textworld_express"), Roles(train=games, validation=games, seen_test=[],
                        unseen_test=[]), step_limit=12, step_timeout_s=30, limit=None)
    assert success(seed_source("experience_learner"), task).score >= 0.9
    assert success(NOTHING, task).score <= 0.5
