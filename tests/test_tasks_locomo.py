"""LoCoMo loading: a small hand-written file for the quirks, plus the real file when it is present.

The real data (CC BY-NC) is only read from where it lives; no part of it is copied into these tests.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from mstar_ray.families.qa import locomo
from mstar_ray.families.qa.locomo import (
    DataNotFoundError,
    find_locomo_file,
    load_locomo,
)
from mstar_ray.families.task_registry import load_task

DIA_ID = re.compile(r"D\d+:\d+")
FOUR_CATEGORIES = {"multi-hop", "temporal", "open-domain", "single-hop"}


# ---------------------------------------------------------------------------------------------------------
# A made-up conversation that carries every quirk of the real file.


def _turn(session: int, index: int, speaker: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": f"D{session}:{index}", "text": text, **extra}


def _fake_sample(sample_id: str) -> dict[str, Any]:
    conversation: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    # Keys deliberately out of order, with session 10 before 2, and a date for a session with no turns.
    conversation["session_10_date_time"] = "9:00 am on 3 March, 2021"
    conversation["session_10"] = [_turn(10, 1, "Ann", "Late news."), _turn(10, 2, "Bob", "Oh?")]
    conversation["session_1_date_time"] = "1:05 pm on 1 January, 2021"
    conversation["session_1"] = [
        _turn(1, 1, "Ann", "Hello Bob."),
        _turn(1, 2, "Bob", "Look at this.", img_url=["http://example.invalid/x.jpg"], blip_caption="a red kite"),
    ]
    conversation["session_2_date_time"] = "2:10 pm on 2 February, 2021"
    conversation["session_2"] = [_turn(2, 1, "Ann", "I bought 3 lamps.")]
    conversation["session_11_date_time"] = "4:00 pm on 9 April, 2021"
    qa = [
        {"question": "How many lamps?", "answer": 3, "evidence": ["D2:1"], "category": 1},
        {"question": "What did Bob share?", "answer": "a kite", "evidence": ["D1:2; D10:2"], "category": 4},
        {"question": "When was the late news?", "answer": "3 March 2021", "evidence": ["D:10:1"], "category": 2},
        {"question": "Odd ids?", "answer": "x", "evidence": ["D", "D7:7", "D1:1", "D1:1"], "category": 3},
        {"question": "Trick?", "adversarial_answer": "lamps", "evidence": ["D2:1"], "category": 5},
        {"question": "No answer at all?", "evidence": [], "category": 5},
        {"question": "No evidence?", "answer": "maybe", "evidence": [], "category": 3},
    ]
    return {"sample_id": sample_id, "conversation": conversation, "qa": qa, "event_summary": {}}


@pytest.fixture
def fake_file(tmp_path: Path) -> Path:
    path = tmp_path / "fake_locomo.json"
    path.write_text(json.dumps([_fake_sample("conv-a"), _fake_sample("conv-b")]), encoding="utf-8")
    return path


def test_fake_sessions_are_the_default_texts_and_hold_their_turns(fake_file: Path) -> None:
    task = load_locomo(fake_file)
    assert task.name == "locomo/conv-a"
    assert [t.id for t in task.texts] == ["S1", "S2", "S10"]
    assert task.texts[0].text == ("[1:05 pm on 1 January, 2021]\nAnn: Hello Bob.\n"
                                  "Bob: Look at this. [shares an image: a red kite]")
    assert task.texts[2].text == "[9:00 am on 3 March, 2021]\nAnn: Late news.\nBob: Oh?"
    evidence = task.evidence()
    assert list(evidence) == ["D1:1", "D1:2", "D2:1", "D10:1", "D10:2"]
    assert evidence["D1:2"] == ("S1", "Bob: Look at this. [shares an image: a red kite]")
    assert evidence["D10:1"] == ("S10", "Ann: Late news.")
    by_question = {q.question: q for q in task.items}
    assert by_question["What did Bob share?"].evidence == ["D1:2", "D10:2"]  # evidence still names turns
    assert [task.evidence_holders()[e] for e in by_question["What did Bob share?"].evidence] == ["S1", "S10"]


def test_fake_turns_are_an_option_ordered_numerically_and_formatted(fake_file: Path) -> None:
    task = load_locomo(fake_file, granularity="turn")
    assert task.name == "locomo/conv-a/turns"
    assert [t.id for t in task.texts] == ["D1:1", "D1:2", "D2:1", "D10:1", "D10:2"]
    assert task.texts[0].text == "[1:05 pm on 1 January, 2021] Ann: Hello Bob."
    assert task.texts[1].text == "[1:05 pm on 1 January, 2021] Bob: Look at this. [shares an image: a red kite]"
    assert task.texts[3].text == "[9:00 am on 3 March, 2021] Ann: Late news."


def test_one_conversation_in_both_granularities_says_the_same_turns(fake_file: Path) -> None:
    sessions, turns = load_locomo(fake_file), load_locomo(fake_file, granularity="turn")
    assert {u: e.text for u, e in sessions.evidence().items()} == {u: e.text for u, e in turns.evidence().items()}
    assert sessions.items == turns.items
    assert turns.evidence_holders() == {t.id: t.id for t in turns.texts}
    with pytest.raises(ValueError, match="granularity"):
        load_locomo(fake_file, granularity="word")  # type: ignore[arg-type]


def test_fake_questions_handle_every_quirk(fake_file: Path) -> None:
    task = load_locomo(fake_file, categories=(1, 2, 3, 4, 5))
    by_question = {q.question: q for q in task.items}
    assert "No answer at all?" not in by_question  # neither answer nor adversarial_answer: skipped
    assert by_question["How many lamps?"].answer == "3"
    assert by_question["How many lamps?"].category == "multi-hop"
    assert by_question["What did Bob share?"].evidence == ["D1:2", "D10:2"]  # "a; b" split in two
    assert by_question["When was the late news?"].evidence == ["D10:1"]  # stray colon repaired
    assert by_question["When was the late news?"].category == "temporal"
    assert by_question["Odd ids?"].evidence == ["D1:1"]  # malformed and unknown dropped, duplicate merged
    assert by_question["Trick?"].answer == "lamps"
    assert by_question["Trick?"].category == "adversarial"
    assert by_question["No evidence?"].evidence == []
    # Ids are positions in the file's QA list, so they do not shift when categories are filtered.
    assert by_question["Trick?"].id == "conv-a/q4"
    assert by_question["No evidence?"].id == "conv-a/q6"


def test_fake_default_categories_exclude_adversarial(fake_file: Path) -> None:
    task = load_locomo(fake_file)
    assert {q.category for q in task.items} == FOUR_CATEGORIES
    assert all(q.category != "adversarial" for q in task.items)
    only_temporal = load_locomo(fake_file, categories=(2,))
    assert [q.category for q in only_temporal.items] == ["temporal"]


def test_fake_second_conversation_and_range_errors(fake_file: Path) -> None:
    assert load_locomo(fake_file, conversation=1).name == "locomo/conv-b"
    for bad in (2, -1):
        with pytest.raises(ValueError, match=r"out of range.*2 conversations.*0\.\.1"):
            load_locomo(fake_file, conversation=bad)


def test_bad_categories_rejected(fake_file: Path) -> None:
    with pytest.raises(ValueError, match="categories"):
        load_locomo(fake_file, categories=(6,))
    with pytest.raises(ValueError, match="categories"):
        load_locomo(fake_file, categories=())


def test_limit_spreads_across_categories(fake_file: Path) -> None:
    task = load_locomo(fake_file, limit=4, granularity="turn")
    assert {q.category for q in task.items} == FOUR_CATEGORIES
    assert len(task.texts) == 5  # the memory is never cut, only the questions


# ---------------------------------------------------------------------------------------------------------
# Broken files


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not valid JSON"),
        ('{"samples": []}', "expected a JSON list"),
        ('[{"sample_id": "x", "qa": []}]', "conversation"),
        ('[{"sample_id": "x", "conversation": {"session_1": "oops"}, "qa": []}]', "session_1 should be a list"),
        (
            '[{"sample_id": "x", "conversation": {"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]},'
            ' "qa": []}]',
            "session_1_date_time",
        ),
        ('[{"sample_id": "x", "conversation": {}, "qa": [{"question": "q"}]}]', "category"),
    ],
)
def test_corrupted_file_raises_value_error_naming_it(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "broken.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=expected) as caught:
        load_locomo(path)
    assert str(path) in str(caught.value)


def test_non_utf8_file_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match="UTF-8") as caught:
        load_locomo(path)
    assert str(path) in str(caught.value)


# ---------------------------------------------------------------------------------------------------------
# Finding the file


@pytest.fixture
def no_data_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every search place at an empty temporary tree (the real shared file would otherwise be found)."""
    monkeypatch.delenv(locomo.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(locomo, "_project_path", lambda: tmp_path / "project" / "shared" / "data" / "locomo10.json")
    return tmp_path


def test_not_found_names_every_place_and_how_to_get_it(no_data_anywhere: Path, monkeypatch) -> None:
    from_env = no_data_anywhere / "from_env.json"
    monkeypatch.setenv(locomo.ENV_VAR, str(from_env))
    with pytest.raises(DataNotFoundError) as caught:
        find_locomo_file(None)
    message = str(caught.value)
    cache = no_data_anywhere / "xdg" / "mstar-ray" / "locomo10.json"
    project = no_data_anywhere / "project" / "shared" / "data" / "locomo10.json"
    for place in (from_env, cache, project):
        assert str(place) in message
    assert "explicit path (config): not given" in message
    assert "MSTAR_LOCOMO_PATH" in message
    assert "snap-research/locomo" in message and "data/locomo10.json" in message
    assert "CC BY-NC 4.0" in message
    assert isinstance(caught.value, FileNotFoundError)
    assert len(caught.value.searched) == 4
    # Order is part of the contract: config, environment, cache, project.
    assert [message.index(str(p)) for p in (from_env, cache, project)] == sorted(
        message.index(str(p)) for p in (from_env, cache, project)
    )


def test_an_explicit_path_that_does_not_exist_is_an_error_not_a_fallback(no_data_anywhere: Path, monkeypatch) -> None:
    real = no_data_anywhere / "real.json"
    real.write_text("[]")
    monkeypatch.setenv(locomo.ENV_VAR, str(real))
    explicit = no_data_anywhere / "configured.json"
    with pytest.raises(DataNotFoundError) as caught:
        find_locomo_file(explicit)
    assert str(explicit) in str(caught.value) and "does not exist" in str(caught.value)


def test_not_found_without_config_or_env_uses_home_cache(no_data_anywhere: Path, monkeypatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(no_data_anywhere / "home"))
    with pytest.raises(DataNotFoundError) as caught:
        load_locomo()
    message = str(caught.value)
    assert str(no_data_anywhere / "home" / ".cache" / "mstar-ray" / "locomo10.json") in message
    assert "explicit path (config): not given" in message
    assert "$MSTAR_LOCOMO_PATH: not set" in message


def test_search_order(no_data_anywhere: Path, fake_file: Path, monkeypatch) -> None:
    cache = no_data_anywhere / "xdg" / "mstar-ray" / "locomo10.json"
    cache.parent.mkdir(parents=True)
    cache.write_text("[]", encoding="utf-8")
    assert find_locomo_file() == cache
    env_file = no_data_anywhere / "env.json"
    env_file.write_text("[]", encoding="utf-8")
    monkeypatch.setenv(locomo.ENV_VAR, str(env_file))
    assert find_locomo_file() == env_file
    assert find_locomo_file(fake_file) == fake_file
    assert find_locomo_file(str(fake_file)) == fake_file


def test_project_path_points_at_shared_data() -> None:
    repo_root = Path(locomo.__file__).resolve().parents[3]
    assert locomo._project_path() == repo_root.parent / "shared" / "data" / "locomo10.json"


# ---------------------------------------------------------------------------------------------------------
# The real file, when present


@pytest.fixture(scope="module")
def real_file() -> Path:
    try:
        return find_locomo_file()
    except DataNotFoundError:
        pytest.skip("LoCoMo data file not available")


@pytest.fixture(scope="module")
def real_raw(real_file: Path) -> list[dict[str, Any]]:
    return json.loads(real_file.read_text(encoding="utf-8"))


def test_real_conversation_zero(real_file: Path, real_raw: list[dict[str, Any]]) -> None:
    task = load_locomo(real_file, granularity="turn")
    assert task.name == "locomo/conv-26/turns"
    assert task.family == "qa"
    assert 300 < len(task.texts) < 1000
    counts = {c: sum(q.category == c for q in task.items) for c in FOUR_CATEGORIES}
    assert set(counts) == FOUR_CATEGORIES and all(n > 0 for n in counts.values())
    assert counts["single-hop"] > counts["open-domain"]  # single-hop is the biggest category, open-domain the smallest
    raw_qa = real_raw[0]["qa"]
    assert len(task.items) == sum(item["category"] in (1, 2, 3, 4) for item in raw_qa)
    header = re.compile(r"^\[\d{1,2}:\d{2} [ap]m on \d{1,2} [A-Z][a-z]+, \d{4}\] [^:]+: ")
    assert all(header.match(t.text) for t in task.texts)


def test_real_sessions_are_the_papers_raw_texts(real_file: Path, real_raw: list[dict[str, Any]]) -> None:
    task = load_locomo(real_file)
    conversation = real_raw[0]["conversation"]
    sessions = sorted(int(k.split("_")[1]) for k in conversation if re.fullmatch(r"session_\d+", k))
    assert [t.id for t in task.texts] == [f"S{n}" for n in sessions] and 19 <= len(task.texts) <= 35
    turns = load_locomo(real_file, granularity="turn")
    evidence = task.evidence()
    assert list(evidence) == [t.id for t in turns.texts]  # every turn, in order, is a unit of its session
    for text in task.texts:
        number = text.id[1:]
        assert text.text.split("\n")[0] == f"[{conversation[f'session_{number}_date_time'].strip()}]"
        lines = text.text.split("\n")[1:]
        assert lines == [unit_text for unit_text in (evidence[u.id].text for u in text.units)]
        assert all(u.id.startswith(f"D{number}:") for u in text.units)
    for turn in turns.texts:  # a turn's own text is the same in both cuts, up to its line breaks
        assert " ".join(turn.text.split("] ", 1)[1].splitlines()) == evidence[turn.id].text
    for q in task.items:
        assert all(e in evidence for e in q.evidence)


def test_real_turns_follow_numeric_session_order(real_file: Path, real_raw: list[dict[str, Any]]) -> None:
    task = load_locomo(real_file, granularity="turn")
    positions = [tuple(int(x) for x in t.id[1:].split(":")) for t in task.texts]
    assert positions == sorted(positions)
    assert max(session for session, _ in positions) >= 10  # the lexical-order trap exists in this data
    raw_turns = {
        turn["dia_id"]: turn
        for key, turns in real_raw[0]["conversation"].items()
        if re.fullmatch(r"session_\d+", key)
        for turn in turns
    }
    assert len(raw_turns) == len(task.texts)
    for text in task.texts:
        caption = raw_turns[text.id].get("blip_caption")
        assert text.text.endswith(f" [shares an image: {caption}]") == bool(caption)


def test_real_no_adversarial_by_default_and_selectable(real_file: Path) -> None:
    assert all(q.category != "adversarial" for q in load_locomo(real_file).items)
    adversarial = load_locomo(real_file, categories=(5,)).items
    assert adversarial and all(q.category == "adversarial" and q.answer for q in adversarial)


def test_real_integer_answers_become_strings(real_file: Path, real_raw: list[dict[str, Any]]) -> None:
    task = load_locomo(real_file)
    by_id = {q.id: q for q in task.items}
    converted = [
        (f"conv-26/q{i}", item["answer"])
        for i, item in enumerate(real_raw[0]["qa"])
        if item["category"] in (1, 2, 3, 4) and not isinstance(item.get("answer"), str)
    ]
    assert converted, "conversation 0 is known to have integer answers"
    for question_id, raw_answer in converted:
        assert by_id[question_id].answer == str(raw_answer)


def test_real_evidence_is_clean_everywhere(real_file: Path, real_raw: list[dict[str, Any]]) -> None:
    repaired = 0
    for index in range(len(real_raw)):
        task = load_locomo(real_file, conversation=index, categories=(1, 2, 3, 4, 5))
        known = set(task.evidence())
        by_id = {q.id: q for q in task.items}
        for q in task.items:
            assert all(DIA_ID.fullmatch(e) and e in known for e in q.evidence), q
        for i, item in enumerate(real_raw[index]["qa"]):
            for entry in item["evidence"]:
                if DIA_ID.fullmatch(entry):
                    continue
                # Every malformed entry that still holds recognisable ids must come through repaired.
                for session, turn in re.findall(r"D:?(\d+):(\d+)", entry):
                    fixed = f"D{int(session)}:{int(turn)}"
                    if fixed in known:
                        assert fixed in by_id[f"{task.name.split('/')[1]}/q{i}"].evidence
                        repaired += 1
    assert repaired >= 2  # at least the "a; b" split and the stray-colon id


def test_real_conversation_range(real_file: Path, real_raw: list[dict[str, Any]]) -> None:
    total = len(real_raw)
    assert total >= 1
    assert load_locomo(real_file, conversation=total - 1).texts
    with pytest.raises(ValueError, match=f"0\\.\\.{total - 1}"):
        load_locomo(real_file, conversation=total)


def test_registry_loads_locomo(real_file: Path) -> None:
    task = load_task("locomo", data=str(real_file), limit=8)
    assert task.name == "locomo/conv-26"
    assert len(task.items) == 8
    assert {q.category for q in task.items} == FOUR_CATEGORIES
    with_adversarial = load_task("locomo", data=str(real_file), categories=(5,), limit=3)
    assert {q.category for q in with_adversarial.items} == {"adversarial"}
