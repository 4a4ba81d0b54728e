"""``speaker_date_table``: write() also keeps each stated line's date and speaker in a SQLite table, and read() adds
the dated lines of the person a query names, newest first, to what it found."""

from __future__ import annotations

import random
import sqlite3
from typing import Any

import pytest

from mstar_ray.agent.offline import toolkit_answer
from mstar_ray.contract import check_source, inspect_program
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.llm.structured import fallback
from mstar_ray.reflect.offline import READ_LIMIT, NoMutation, reflect, speaker_date_table
from mstar_ray.reflect.offline.reflective import WHY, cues
from mstar_ray.reflect.request import Case
from mstar_ray.reflect.smoke import smoke_test
from mstar_ray.sandbox_host.process import Sandbox
from mstar_ray.seeds import LIBRARY
from tests.conftest import seed_source
from tests.test_second_read import PROGRAM

# The memory of tests/test_second_read.py: the two lines sharing the most words with the query, the oldest first on
# a tie. Asked what Olivia has now, it returns her older statement and Emil's, never the one that updates it.
OLDER = """[3 March 2022]
Olivia: What a joy, I have a red bicycle now.
Emil: What does it matter, I have a bicycle too."""
NEWER = """[9 September 2023]
Olivia: Sold the bike last week; I ride a green scooter.
Emil: Nice, see you soon."""
QUESTION = "What does Olivia have now?"
UPDATE = "[9 September 2023] Olivia: Sold the bike last week; I ride a green scooter."


def run(source: str, question: str, llm: Any = None) -> tuple[str, int]:
    """Load ``source`` in the sandbox, write the newer session first (so that the order of the writes is not the
    order of the dates), snapshot, and read once in a forked reader: (what read() returned, its model calls)."""
    with Sandbox(source, llm=llm or toolkit_answer, readers=2) as sandbox:
        assert sandbox.start().ok
        schema = inspect_program(source).schema
        for text in (NEWER, OLDER):
            outcome = sandbox.write(fallback(schema.knowledge_item, "a chat"), text)
            assert outcome.ok, outcome.describe()
        assert sandbox.snapshot() is None  # reads run in readers forked from the post-write state
        outcome = sandbox.read(fallback(schema.query, question))
        assert outcome.ok, outcome.describe()
        return outcome.value, outcome.llm_calls


def helpers(child: str) -> dict[str, Any]:
    scope: dict[str, Any] = {}
    exec(compile(child, "program.py", "exec"), scope)  # the child of our own test program
    return scope


def test_read_adds_the_newest_dated_statement_of_the_person_asked_about() -> None:
    child = speaker_date_table(PROGRAM, random.Random(0)).source
    assert check_source(child) == []
    before, _ = run(PROGRAM, QUESTION)
    after, _ = run(child, QUESTION)
    assert "scooter" not in before
    assert after.startswith(before + "\n")  # what the parent found is kept, first
    # Olivia's lines, newest first by their dates (the newer session was written first), each with its date; her
    # older statement, which read() found already, is not repeated
    assert after[len(before) + 1:].split("\n") == [UPDATE]


def test_a_name_in_lower_case_names_the_speaker_too() -> None:
    # A query field a model (or the offline agent) fills in lower case ("current job mirela") still names her.
    child = speaker_date_table(PROGRAM, random.Random(0)).source
    assert UPDATE in run(child, "what does olivia have now")[0]


def test_a_query_naming_no_speaker_reads_as_before() -> None:
    child = speaker_date_table(PROGRAM, random.Random(0)).source
    question = "Who has a bicycle?"
    assert run(child, question)[0] == run(PROGRAM, question)[0]


def table(*texts: str) -> tuple[dict[str, Any], sqlite3.Connection]:
    """The child's helpers, and a real SQLite table holding ``texts`` as its write() stores them."""
    scope = helpers(speaker_date_table(PROGRAM, random.Random(0)).source)
    db = scope["open_speaker_table"](sqlite3.connect(":memory:"))
    for text in texts:
        scope["store_speaker_lines"](db, scope["dated_lines"](text))
    return scope, db


def test_the_persons_lines_sharing_the_rarer_words_asked_come_first_then_the_newest() -> None:
    tram = "[1 January 2024] Olivia: I ride the tram to work these days."
    scope, db = table(NEWER, OLDER, "[1 January 2024]\nOlivia: I ride the tram to work these days.\nEmil: A scooter!")
    # the red bicycle shares no word asked about; "scooter" is rarer among Olivia's lines than "ride"; Emil's
    # scooter is not Olivia's
    assert scope["with_speaker_rows"]("", db, "Which scooter does Olivia ride?").split("\n") == [UPDATE, tram]
    newest = scope["with_speaker_rows"]("", db, "Olivia").split("\n")
    assert newest[:2] == [tram, UPDATE] and len(newest) == 3


def test_the_rows_stay_within_what_read_may_return() -> None:
    scope, db = table(NEWER, OLDER)
    full = "\n".join(f"Emil: line {i} of a long chat about bicycles" for i in range(200))[:READ_LIMIT]
    out = scope["with_speaker_rows"](full, db, QUESTION)
    assert len(out) <= READ_LIMIT and UPDATE in out
    kept = out[: out.index(UPDATE) - 1]
    assert full.startswith(kept) and len(kept) >= READ_LIMIT - READ_LIMIT // 3  # the parent's last lines gave way
    assert scope["with_speaker_rows"]("", db, QUESTION).split("\n")[0] == UPDATE
    assert scope["with_speaker_rows"](full, db, "Who has a bicycle?") == full  # no speaker named: as before


def test_dates_sort_in_time_order_whatever_their_format() -> None:
    order = helpers(speaker_date_table(PROGRAM, random.Random(0)).source)["date_order"]
    written = ["10:15 am on 8 May, 2023", "1:56 pm on 8 May, 2023", "2023-05-09", "9 September 2023",
               "12:30 am on 10 September, 2023", "January 4th, 2024"]
    assert sorted(written, key=order) == written
    assert order("some day") == ""


def test_every_library_seed_it_applies_to_passes_the_checks_and_the_smoke_test() -> None:
    applied = 0
    for seed in LIBRARY:
        source = seed.path.read_text(encoding="utf-8")
        try:
            child = speaker_date_table(source, random.Random(0)).source
        except NoMutation:
            continue
        applied += 1
        assert check_source(child) == [], seed.name
        assert smoke_test(child, HashingEmbedder()) is None, seed.name
        with pytest.raises(NoMutation):
            speaker_date_table(child, random.Random(0))  # once per program
    assert applied == len(LIBRARY)


def test_a_read_that_asks_the_toolkit_model_still_asks_it_once() -> None:
    parent = seed_source("llm_summarizer")
    child = speaker_date_table(parent, random.Random(0)).source
    asked: list[int] = []

    def model(messages: list[dict[str, str]]) -> str:
        asked.append(1)
        return toolkit_answer(messages)

    value, calls = run(child, QUESTION, llm=model)
    assert calls == 1 and len(asked) == 1
    assert UPDATE in value and len(value) <= READ_LIMIT


@pytest.mark.parametrize("change, why", [
    ((r'self.lines.extend(line for line in raw_text.split("\n") if line.strip())', "pass"), "raw text"),
    ((r'return "\n".join(ranked[:TOP])', 'return ""'), "literals"),
    (("    text: str\n    limit: int", "    limit: int"), "text field"),
    (("    def read(self, query):\n        wanted", "    def read(self, query):\n        query = query.text\n"
      "        wanted"), "rebinds"),
])
def test_it_declines_a_program_it_cannot_edit(change: tuple[str, str], why: str) -> None:
    broken = PROGRAM.replace(*change)
    assert broken != PROGRAM
    with pytest.raises(NoMutation, match=why):
        speaker_date_table(broken, random.Random(0))


def test_a_when_or_now_question_whose_context_lacks_the_persons_dated_lines_points_to_the_table() -> None:
    undated = Case(question="What car does Olivia drive now?", expected="Fiat", prediction="Kia", score=0.0,
                   context="Olivia: I drive a Kia.\nEmil: Nice.")
    under_header = undated.model_copy(update={"context": "[9 September 2023]\nOlivia: I drive a Kia."})
    other_person = undated.model_copy(update={"context": "[9 September 2023] Emil: I drive a Kia."})
    not_about_time = undated.model_copy(update={"question": "What car does Olivia drive?"})
    assert cues([undated])["speaker_date_table"] == 1.0
    assert cues([other_person])["speaker_date_table"] == 1.0
    assert cues([under_header])["speaker_date_table"] == 0
    assert cues([not_about_time])["speaker_date_table"] == 0


def test_the_reflector_draws_it_for_those_failures_and_says_why() -> None:
    parent = seed_source("vector_search")
    failures = [Case(question="When did Olivia get the Fiat?", expected="9 September 2023", prediction="Kia",
                     score=0.0, stage="retrieval", context="Olivia: I love my new car.")] * 3
    children = [reflect(parent, [parent], random.Random(s), failures=failures) for s in range(24)]
    drawn = [c for c in children if c.kind == "speaker_date_table"]
    assert drawn and all("no dated line of theirs" in c.description.split(WHY, 1)[1] for c in drawn)
