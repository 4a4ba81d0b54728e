"""An episode as text, one labelled line per event: ``OBJECTIVE:``, ``OBSERVATION:``, ``ACTION:`` and
``OUTCOME:``. The expert transcripts written into memory and the trace of an evaluated episode (what the
reflector reads) have this one form, as the M* reference writes ALFWorld's."""

from __future__ import annotations

import re

_SPACE = re.compile(r"\s+")


def one_line(text: str) -> str:
    """The engines' observations span lines and trail spaces; a transcript keeps one event per line."""
    return _SPACE.sub(" ", text).strip()


class Transcript:
    """``observation_chars`` cuts each observation (a trace shown to a reflector must stay short); the texts
    written into memory keep them whole."""

    def __init__(self, goal: str, first_observation: str, *, observation_chars: int | None = None):
        self.observation_chars = observation_chars
        self.lines = [f"OBJECTIVE: {one_line(goal)}"]
        self.observe(first_observation)
        self.actions = 0

    def observe(self, text: str) -> None:
        seen = one_line(text)
        if self.observation_chars is not None and len(seen) > self.observation_chars:
            seen = seen[: self.observation_chars].rstrip() + " ..."
        self.lines.append(f"OBSERVATION: {seen}")

    def act(self, action: str, note: str = "") -> None:
        self.actions += 1
        self.lines.append(f"ACTION: {one_line(action)}" + (f"   ({note})" if note else ""))

    def outcome(self, text: str) -> None:
        self.lines.append(f"OUTCOME: {text}")

    def text(self) -> str:
        return "\n".join(self.lines)


def opening(goal: str, first_observation: str) -> str:
    """What an episode's memory is asked from (its query's source): the transcript's first two lines."""
    return Transcript(goal, first_observation).text()
