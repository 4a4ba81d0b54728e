"""The offline answerer reads its context as a model does: meaning through the run's embedding model, two hops,
what holds now. Each test states a context a model answers right and fails without the rule it names."""

from __future__ import annotations

import pytest

from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.embedding.cached import CachedEmbedder
from mstar_ray.embedding.minilm import MiniLMEmbedder
from mstar_ray.families import meaning
from mstar_ray.families.qa import ANSWER
from mstar_ray.families.qa.offline import answer_from_context
from mstar_ray.families.step import Shown


@pytest.fixture(scope="module")
def minilm() -> CachedEmbedder:
    return CachedEmbedder(MiniLMEmbedder())


CAR = """[2 March 2021]
Ines: Hey Emil! How have you been?
Ines: My old Toyota broke down again this morning.
Ines: The weather has been so grey all week.
[3 April 2022]
Ines: Today I finally traded in the Toyota for a shiny Fiat.
Emil: Wow, how exciting!
Ines: I found a great new podcast about old shipwrecks."""


def test_a_kind_finds_its_instance_through_the_embedding_model(minilm: CachedEmbedder) -> None:
    # No sentence says "car" or "drive": only meaning links the question to the Fiat.
    question = "What car does Ines drive now?"
    assert answer_from_context(CAR, question) != "Fiat"  # words alone
    with meaning.lent(minilm):
        assert answer_from_context(CAR, question) == "Fiat"


def test_the_offline_backend_lends_its_embedding_model_to_the_answer_step(minilm: CachedEmbedder) -> None:
    shown = Shown(instruction="", always_on="", context=CAR)
    assert OfflineBackend(meaning=minilm).perform(ANSWER, shown, "What car does Ines drive now?") == "Fiat"
    assert OfflineBackend().perform(ANSWER, shown, "What car does Ines drive now?") != "Fiat"
    assert not meaning.available()  # lent for the step only


HOBBY = """[5 May 2021]
Olivia: My weekends are all about fencing at the moment.
Olivia: The supermarket was packed this afternoon.
[9 September 2022]
Olivia: I've gone off fencing; today I started knitting instead.
Olivia: Do you ever feel like this year is flying by?"""


def test_what_holds_now_is_the_latest_statement_and_the_value_it_takes(minilm: CachedEmbedder) -> None:
    with meaning.lent(minilm):
        assert answer_from_context(HOBBY, "Which hobby is Olivia into these days?") == "knitting"


CITY = """[1 May 2021]
Emil: I live in Lisbon with two flatmates.
[3 June 2022]
Emil: I live in Dresden with two flatmates."""


def test_now_prefers_the_most_recent_dated_statement_of_equal_support() -> None:
    # Both statements match the question equally; only their dates tell which holds now.
    assert answer_from_context(CITY, "Where does Emil live now?") == "Dresden"
    assert answer_from_context(CITY, "Where did Emil live with two flatmates?") == "Lisbon"  # no "now": first


FOOD = """[1 May 2022]
Emil: I grew up in Porto, so I'm used to rain.
Ines: My favourite food is ramen, no contest.
Emil: My favourite food is biryani, no contest.
Olivia: I grew up in Bristol."""


def test_two_hops_resolve_the_person_named_by_a_relation_then_answer_about_them() -> None:
    assert answer_from_context(FOOD, "What is the favourite food of the person who grew up in Porto?").startswith("biryani")
    assert answer_from_context(FOOD, "What is the favourite food of Emil?").startswith("biryani")
    # The relation resolves from the context only: nobody there adopted a pet, so no one is substituted.
    assert not answer_from_context(FOOD, "What is the favourite food of the person who adopted Bramble?").startswith(
        "biryani")


def test_without_an_embedding_model_nothing_is_lent() -> None:
    assert meaning.similarities("car", ["Fiat"]) is None


CARE = """[4 March 2021]
Olivia: I drive a little Toyota to work every day.
Ines: Sure, take care!
[8 June 2022]
Olivia: Today I traded in the Toyota for a second-hand Fiat.
Ines: Sure, take care on the roads!"""


def test_a_word_that_only_looks_like_the_asked_kind_does_not_stand_in_for_it(minilm: CachedEmbedder) -> None:
    # "care" is not "car": matched by words it hid the statements a model reads for a car.
    with meaning.lent(minilm):
        assert answer_from_context(CARE, "Which car does Olivia currently own?") == "Fiat"
