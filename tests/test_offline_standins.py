"""The offline stand-ins answer what a request asks, as a model would, whoever asks: toolkit prompts read as
instructions + fields + material, Query fields filled by role, facts restated with speaker and resolved dates."""

from __future__ import annotations

from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.statements import statements
from mstar_ray.program_schema import FieldSpec as F

SESSION = """[1:56 pm on 8 May, 2023]
Caroline: Hey Mel! How have you been?
Melanie: I'm swamped with the kids & work. What's up with you?
Caroline: I went to a LGBTQ support group yesterday and it was so powerful.
Melanie: I ran a charity race for mental health last week."""
QUESTION = "When did Caroline go to the LGBTQ support group?"


def _ask(content: str) -> str:
    return OfflineBackend().toolkit_completion([{"role": "user", "content": content}])


def test_relative_dates_are_resolved_against_the_session_date() -> None:
    said = [s.render() for s in statements(SESSION)]
    assert "Caroline: I went to a LGBTQ support group on 7 May 2023 and it was so powerful." in said
    assert "Melanie: I ran a charity race for mental health the week before 8 May 2023." in said


def test_an_answer_request_gets_the_answer_span() -> None:
    prompt = (f"Answer the question using only the evidence below.\nRules:\n1) Be brief.\n\nQuestion: {QUESTION}\n"
              f"Target person: Caroline\n\nEvidence:\n{SESSION}\n\nReturn a concise factual answer.")
    assert _ask(prompt) == "7 May 2023"


def test_fields_written_in_a_section_of_rules_are_still_fields() -> None:
    # A list of rules, then fields with no blank line before the question, then the material under its own
    # heading: a model reads the question wherever the prompt puts it.
    prompt = (f"You help a QA system.\nGuidelines:\n- Be brief.\n- Use the context only.\n\nTopic: support groups\n"
              f"Question: {QUESTION}\n\nContext:\n{SESSION}\n\nReturn only the answer.")
    assert _ask(prompt) == "7 May 2023"


def test_a_summary_request_for_a_query_quotes_the_related_evidence_with_its_date() -> None:
    prompt = f"Summarize only the information relevant to the query.\n\nQuery: {QUESTION}\n\nTexts:\n{SESSION}"
    out = _ask(prompt)
    assert "on 7 May 2023" in out and "Caroline" in out
    assert "Summarize" not in out and "charity" not in out  # instructions and unrelated lines are not evidence


def test_closing_instructions_are_not_material_and_set_the_length() -> None:
    prompt = (f"Task: return only evidence snippets relevant to the query.\n\nQuery: {QUESTION}\n\nEvidence:\n{SESSION}"
              "\n\nReturn up to 1 short bullet lines.")
    out = _ask(prompt)
    assert out.startswith("- ") and len(out.splitlines()) == 1 and "Return" not in out


def test_a_rewrite_request_gets_the_query_and_its_terms() -> None:
    out = _ask(f"Rewrite the query for a keyword search.\n\nQuery: {QUESTION}\n\nNotes:\nnone")
    assert out.splitlines()[0] == QUESTION and "Caroline" in out.splitlines()[1]


def test_a_pick_request_gets_the_numbers_of_the_related_items() -> None:
    prompt = (f"Select the items most relevant to the query. Up to 1 items.\n\nQuery: {QUESTION}\n\nItems:\n"
              "1. Melanie ran a charity race.\n2. Caroline went to a LGBTQ support group.\n3. Melanie paints.")
    assert _ask(prompt) == "2"


def test_query_fields_are_filled_by_role_and_left_empty_when_the_question_is_silent() -> None:
    fields = [F(name="query_text", type="str"),
              F(name="subject", type="str", optional=True, description="the person asked about"),
              F(name="answer_type", type="str", optional=True, description="expected answer type"),
              F(name="condition", type="str", optional=True, description="hypothetical condition, if any"),
              F(name="needs_list", type="bool"), F(name="need_numeric", type="bool")]
    backend = OfflineBackend()
    q = backend.build_query("", fields, QUESTION)
    assert q == {"query_text": QUESTION, "subject": "Caroline", "answer_type": "date", "condition": None,
                 "needs_list": False, "need_numeric": False}
    q = backend.build_query("", fields, "Would Caroline pursue counseling if she hadn't received support?")
    assert q["condition"] == "if she hadn't received support"
    assert backend.build_query("", fields, "How many children does Melanie have?")["need_numeric"] is True
    assert backend.build_query("", fields, "What activities does Melanie partake in?")["needs_list"] is True


def test_a_field_named_for_what_the_query_aims_at_is_filled_by_what_it_is() -> None:
    fields = [F(name="target_person", type="str", optional=True), F(name="target_relation", type="str", optional=True),
              F(name="target_topic", type="str", optional=True)]
    q = OfflineBackend().build_query("", fields, QUESTION)
    assert q["target_person"] == "Caroline"
    assert "Caroline" not in q["target_relation"] and "support" in q["target_relation"]
    assert "support" in q["target_topic"]


def test_a_relation_keeps_the_names_unless_another_field_carries_them() -> None:
    question = "What type of pet does Noodle have?"
    relation = F(name="focus", type="str", optional=True, description="the relation asked about")
    subject = F(name="person", type="str", optional=True, description="the person asked about")
    backend = OfflineBackend()
    alone = backend.build_query("", [relation], question)["focus"]
    beside = backend.build_query("", [subject, relation], question)
    assert "noodle" in alone.lower() and "pet" in alone
    assert beside["person"] == "Noodle" and "noodle" not in beside["focus"].lower() and "pet" in beside["focus"]


def test_item_fields_hold_the_kind_of_statement_their_name_asks_for() -> None:
    fields = [F(name="summary", type="str"), F(name="key_facts", type="list[str]"),
              F(name="causal_links", type="list[str]"), F(name="activities_planned", type="list[str]"),
              F(name="reference_date", type="str", optional=True)]
    raw = SESSION + "\nCaroline: I'm going to paint a mural next month because the group inspired me."
    item = OfflineBackend().extract_item("", fields, raw)
    assert item["reference_date"] == "8 May 2023"
    assert "Caroline: I went to a LGBTQ support group on 7 May 2023 and it was so powerful." in item["key_facts"]
    assert not any(fact.endswith("?") for fact in item["key_facts"])
    assert item["causal_links"] == ["Caroline: I'm going to paint a mural in June 2023 because the group inspired me."]
    assert item["activities_planned"] == item["causal_links"]
    assert "on 7 May 2023" in item["summary"]


def test_a_list_named_for_a_kind_of_statement_holds_those_statements_whatever_its_description_mentions() -> None:
    done = F(name="activities_done", type="list[str]", description="activities done by the participants")
    item = OfflineBackend().extract_item("", [done], SESSION)
    assert "Caroline" not in item["activities_done"] and "Melanie" not in item["activities_done"]
    assert "Melanie: I ran a charity race for mental health the week before 8 May 2023." in item["activities_done"]


def test_a_summary_quotes_each_sentence_once_and_no_piece_of_one_already_quoted() -> None:
    # One record's summary, fact and raw text often repeat a sentence; a model writing a note does not.
    said = "Caroline: I went to a LGBTQ support group on 7 May 2023 and it was so powerful."
    evidence = "\n".join([f"Summary: {said}", f"Facts: {said}", "Spans: LGBTQ support group on 7 May 2023",
                          SESSION])
    out = _ask(f"Keep only the evidence relevant to the query.\n\nQuery: {QUESTION}\n\nEvidence:\n{evidence}\n\n"
               "Return a short note (not more than 3 lines).")
    lines = out.splitlines()
    assert len(lines) == len(set(lines))
    assert sum("support group" in line for line in lines) == 1, out


def test_a_date_stays_inside_the_record_it_is_written_in() -> None:
    text = ("[doc 3] [1:56 pm on 2 May, 2022]\n[doc 3] Nate: I went to the lake yesterday.\n"
            "[doc 5] Nate: I dyed my hair last week.\n[doc 3] Joanna: Me too, last week.\n"
            "---\nJoanna: I finished my screenplay yesterday.\n"
            "[Record 2]\nReference date: 8 May 2023\nCaroline: I ran yesterday.")
    said = [s.render() for s in statements(text)]
    assert "Nate: I went to the lake on 1 May 2022." in said
    assert "Nate: I dyed my hair last week." in said  # doc 5 has no date of its own
    assert "Joanna: Me too, the week before 2 May 2022." in said  # back in doc 3
    assert "Joanna: I finished my screenplay yesterday." in said  # past the separator
    assert "Caroline: I ran on 7 May 2023." in said
    # A name or a date in brackets labels no record: lines under a session's date keep it.
    session = "[8 May 2023]\n[Caroline] I went yesterday.\n[9 May 2023] Mel: hi"
    assert statements(session)[0].anchor is not None


def test_an_answer_request_the_material_does_not_answer_gets_not_found() -> None:
    # The material names Melanie but says nothing of a dog: a model answering only from it says so.
    prompt = ("Answer the query using only the records below.\n\nQuery: When did Melanie adopt a dog? Melanie date\n\n"
              f"Records:\n{SESSION}")
    assert _ask(prompt) == "Not found in memory."
    # What the records do state is answered, whatever hints the program appends after the question.
    assert _ask(prompt.replace("When did Melanie adopt a dog?", QUESTION)) == "7 May 2023"
