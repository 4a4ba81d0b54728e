"""A family's steps send a model exactly the prompts they sent when each was a method of the LLM backend: the
run-wide reply cache is keyed by them, so a changed byte would silently miss every cached reply of a user's run
(and change its results). The digests were taken from the backend's ``answer``, ``respond`` and ``act`` before the
steps moved into their families; ``choose`` is pinned from its first version. A deliberate change of a prompt
changes its digest here, in the same commit."""

from __future__ import annotations

import hashlib
import json

import pytest

from mstar_ray.agent.llm_backend import LLMBackend
from mstar_ray.families.choice import CHOOSE, Asked
from mstar_ray.families.episode import ACT
from mstar_ray.families.episode.turn import Turn
from mstar_ray.families.qa import ANSWER
from mstar_ray.families.rubric import RESPOND
from mstar_ray.families.step import Shown
from mstar_ray.llm.endpoint import Completion
from mstar_ray.families.rubric.conversations import Message

LONG_TURN = "It hurts when I run. " * 700  # beyond what the respond prompt keeps of a conversation
CONVERSATION = [Message(role="system", content="You are a health assistant."), Message(role="user", content="My knee hurts."),
                Message(role="assistant", content="Since when?"), Message(role="user", content=LONG_TURN)]
ROOM = "You see a room with a bed and a basket. " * 8  # each earlier observation is cut in the act prompt
HISTORY = tuple((action, f"OBS{i}: {ROOM}") for i, action in enumerate(
    ["look", "take cap", "open basket", "look", "take sock", "put sock in basket", "look", "take shoe"], start=1))

CASES = [
    (ANSWER, Shown("Answer briefly.", "Policy: dates as D Month YYYY.", "[1 May 2023] Ann: I moved to Lisbon."),
     "Where does Ann live?", 64, "06b47059aa039b3cde02a7bc8189281b56752cb9b8c420329b452da74244498a"),
    (ANSWER, Shown("", "  ", ""), "Where?", 64, "1aca6bc7309820963243d9abb6e01ee5ae81951777bc81007c98aa8de7ca1227"),
    (RESPOND, Shown("Be kind and precise.", "Always suggest a doctor.", "Conversation: knee pain. Ideal response: rest."),
     CONVERSATION, None, "a379880631bb02680493005cda2394cb8722698e221271f63ce773000e450b03"),
    (RESPOND, Shown("", "", ""), [Message(role="user", content="Hello?")], None,
     "d0de13540104850c940738148ab9b0a44597554ca278a4ddecc5d9defba47745"),
    (ACT, Shown("Replay what worked.", "Put things where they belong.", "ACTION: take cap\nACTION: put cap in basket"),
     Turn("Tidy the room.", " You are in a bedroom. ", "You carry: nothing.", HISTORY, ("look", "put cap in basket", "take shoe")),
     24, "cdbc58c7855ba639a0eb14d02a9292c0ab8c635bbc006d6f12e5dd0cbff472f0"),
    (ACT, Shown("", "", ""), Turn("g", "o", None, (), ("look",)), 24,
     "47d6cb3a69b566bf4399c527ec40938cbb7418ad7f14f5978c1f03d17e403efd"),
    (CHOOSE, Shown("Pick from memory.", "", "[4 March 2024] Mara: Tomas fixed the toaster."),
     Asked("Who fixed the toaster?", ("Ines", "Tomas")), 8,
     "3ff16a7ae7b79c41380176031743ae2677113a22a3bd9dc7bf56d18291eace5a"),
]


class Recording:
    """The task model's client, recording what each step sends (the backend under test is the real one)."""

    model = "recorded"

    def __init__(self) -> None:
        self.sent: list[tuple[str, int | None, str]] = []

    def complete(self, messages, *, step, json_mode=False, max_tokens=None, budget=None) -> Completion:
        self.sent.append((step, max_tokens, json.dumps(messages, sort_keys=True)))
        return Completion(text="A")


@pytest.mark.parametrize("step, shown, given, max_tokens, digest", CASES, ids=lambda v: getattr(v, "name", None))
def test_each_step_sends_the_prompt_it_always_sent(step, shown, given, max_tokens, digest):
    client = Recording()
    LLMBackend(client).perform(step, shown, given)
    ((name, sent_max_tokens, messages),) = client.sent
    assert (name, sent_max_tokens) == (step.name, max_tokens)
    assert hashlib.sha256(messages.encode()).hexdigest() == digest
