"""The offline agent's text utilities: turns, sentences, tokens, stemming, dates, names, numbers."""

from __future__ import annotations

import pytest

from mstar_ray import text as tx

LOCOMO_LINE = "[1:56 pm on 8 May, 2023] Caroline: I went to a LGBTQ support group yesterday and it was so powerful."


def test_parse_turn_locomo_line() -> None:
    turn = tx.parse_turn(LOCOMO_LINE)
    assert turn.header == "1:56 pm on 8 May, 2023"
    assert turn.speaker == "Caroline"
    assert turn.body == "I went to a LGBTQ support group yesterday and it was so powerful."
    assert turn.date is not None and turn.date.text == "8 May 2023"
    assert (turn.date.year, turn.date.month, turn.date.day) == (2023, 5, 8)


def test_parse_turn_synthetic_and_bare_lines() -> None:
    turn = tx.parse_turn("[14 March 2023] Alice: We finally adopted a puppy, his name is Biscuit!")
    assert (turn.speaker, turn.date.text if turn.date else None) == ("Alice", "14 March 2023")
    assert turn.body.startswith("We finally adopted")

    bare = tx.parse_turn("just some words: with a colon")
    assert bare.header == "" and bare.speaker == "" and bare.date is None
    assert bare.body == "just some words: with a colon"

    parenthesised = tx.parse_turn("(3 June 2023) Bob: Hi.")
    assert (parenthesised.header, parenthesised.speaker, parenthesised.body) == ("3 June 2023", "Bob", "Hi.")

    bulleted = tx.parse_turn("- [3 June 2023] Bob Smith: Hi there.")
    assert bulleted.speaker == "Bob Smith" and bulleted.body == "Hi there."


def test_split_sentences_respects_abbreviations_and_lines() -> None:
    text = "I met Dr. Smith today. He was kind! Did you?\nNew line here. It cost 3.5 dollars"
    assert tx.split_sentences(text) == [
        "I met Dr. Smith today.",
        "He was kind!",
        "Did you?",
        "New line here.",
        "It cost 3.5 dollars",
    ]
    assert tx.split_sentences("") == []
    assert tx.split_sentences("  \n \n") == []


def test_tokenize_drops_possessive_and_lowercases() -> None:
    assert tx.tokenize("Alice's dog Biscuit’s toy") == ["alice", "dog", "biscuit", "toy"]
    assert tx.tokenize("I don't know") == ["i", "don't", "know"]


@pytest.mark.parametrize(
    "group",
    [
        ["adopted", "adopt", "adopting", "adopts", "adoption"],
        ["live", "lived", "living", "lives"],
        ["run", "running"],
        ["study", "studies", "studied"],
    ],
)
def test_stem_conflates_inflections(group: list[str]) -> None:
    assert len({tx.stem(w) for w in group}) == 1, {w: tx.stem(w) for w in group}


@pytest.mark.parametrize(
    "group",
    [
        ["care", "cares", "cared", "caring"],
        ["hope", "hopes", "hoped", "hoping"],
        ["hop", "hops", "hopped", "hopping"],
        ["plane", "planes"],
        ["plan", "plans", "planned", "planning"],
        ["bake", "baked", "baking"],
        ["complete", "completed", "completing"],
    ],
)
def test_stem_conflates_inflections_of_silent_e_words(group: list[str]) -> None:
    assert len({tx.stem(w) for w in group}) == 1, {w: tx.stem(w) for w in group}


# A word of one short syllable and the same letters with a silent "e" are different words: stripping the "e"
# made "Which car does Olivia currently own?" match "Sure, take care!" by words, so the meaning path never ran.
_SILENT_E_PAIRS = [("car", "care"), ("hop", "hope"), ("plan", "plane"), ("tim", "time"), ("hat", "hate"),
                   ("rid", "ride"), ("hid", "hide"), ("cut", "cute"), ("kit", "kite"), ("win", "wine"),
                   ("pin", "pine"), ("hug", "huge"), ("ton", "tone"), ("not", "note"), ("bit", "bite")]


@pytest.mark.parametrize(("bare", "with_e"), _SILENT_E_PAIRS)
def test_stem_keeps_a_short_word_apart_from_its_silent_e_twin(bare: str, with_e: str) -> None:
    forms_bare = {tx.stem(w) for w in (bare, bare + "s", bare + bare[-1] + "ed", bare + bare[-1] + "ing")}
    forms_e = {tx.stem(w) for w in (with_e, with_e + "s", with_e + "d", with_e[:-1] + "ing")}
    assert not forms_bare & forms_e, (sorted(forms_bare), sorted(forms_e))


def test_stem_leaves_short_and_vowelless_remainders_alone() -> None:
    assert tx.stem("thing") == "thing"
    assert tx.stem("bring") == "bring"
    assert tx.stem("dog") == "dog"
    assert tx.stem("adopt") != tx.stem("adapt")


def test_content_words_drop_stop_and_question_words() -> None:
    assert tx.content_words("When did Alice adopt the dog?") == ["alice", "adopt", "dog"]
    assert tx.content_stems("What did Alice adopt?") == ["alic", "adopt"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("on 8 May, 2023 we met", ["8 May 2023"]),
        ("14 March 2023", ["14 March 2023"]),
        ("May 8th, 2023", ["8 May 2023"]),
        ("since May 2023", ["May 2023"]),
        ("back in 2022 I moved", ["2022"]),
        ("2023-05-08", ["8 May 2023"]),
        ("the 3rd of June", ["3 June"]),
        ("in Sept. 2021 and 1 Jan 2020", ["September 2021", "1 January 2020"]),
        ("I went there yesterday", []),
        ("at 1:56 pm", []),
        ("I may go, it cost $2023", []),
    ],
)
def test_find_dates(text: str, expected: list[str]) -> None:
    assert [d.text for d in tx.find_dates(text)] == expected


def test_resolve_relative_dates_against_an_anchor() -> None:
    anchor = tx.find_dates("8 May, 2023")[0]
    assert tx.resolve_relative("yesterday", anchor) == "7 May 2023"
    assert tx.resolve_relative("last year", anchor) == "2022"
    assert tx.resolve_relative("last month", anchor) == "April 2023"
    assert tx.resolve_relative("two years ago", anchor) == "2021"
    assert tx.resolve_relative("3 days ago", anchor) == "5 May 2023"
    assert tx.resolve_relative("last week", anchor) == "the week before 8 May 2023"
    assert tx.resolve_relative("last Sunday", anchor) == "the Sunday before 8 May 2023"
    assert tx.resolve_relative("a few years ago", anchor) == "a few years ago"
    assert tx.resolve_relative("yesterday", None) is None
    assert tx.resolve_relative("yesterday", tx.find_dates("May 2023")[0]) is None
    january = tx.find_dates("1 January 2023")[0]
    assert tx.resolve_relative("yesterday", january) == "31 December 2022"
    assert tx.resolve_relative("last month", january) == "December 2022"


def test_find_relative_dates() -> None:
    found = [r.text for r in tx.find_relative_dates("I went yesterday, and last Sunday, two years ago")]
    assert found == ["yesterday", "last Sunday", "two years ago"]


def test_find_names() -> None:
    names = tx.find_names("Yesterday I met Mel and Jon in New York. Alice's dog Biscuit barked.")
    assert [(n.text, n.sentence_initial) for n in names] == [
        ("Mel", False),
        ("Jon", False),
        ("New York", False),
        ("Alice", True),
        ("Biscuit", False),
    ]
    assert tx.find_names("We went on Monday in May.") == []


def test_find_numbers_skips_dates_and_times() -> None:
    text = "[1:56 pm on 8 May, 2023] I have three kids, 2 dogs and spent $20.50"
    assert tx.find_numbers(text) == ["three", "2", "$20.50"]
    assert tx.first_number("no digits here") is None
    assert tx.first_number("about twelve cats") == 12.0
    assert tx.first_number("it was 1,200 km") == 1200.0


def test_find_places() -> None:
    assert tx.find_places("I moved to Lisbon from New York and visited the Grand Canyon.") == [
        "Lisbon",
        "New York",
        "Grand Canyon",
    ]
    assert tx.find_places("a gift from my home country, Sweden.") == ["Sweden"]
    assert tx.find_common_places("we went camping at the beach last weekend") == ["the beach"]


def test_keywords_prefer_names_and_skip_stop_words() -> None:
    words = tx.keywords("We finally adopted a puppy, his name is Biscuit!")
    assert words[0] == "Biscuit"
    assert "adopted" in words and "puppy" in words
    assert not {"we", "a", "his", "is"} & {w.lower() for w in words}
    assert tx.keywords("") == []


def test_idf_weights_favour_rare_terms() -> None:
    idf = tx.idf_weights([["dog", "park"], ["dog"], ["dog", "lisbon"]])
    assert idf["lisbon"] > idf["dog"] > 0
    assert idf["park"] == idf["lisbon"]
