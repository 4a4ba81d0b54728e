"""Dated dialogue sessions as raw texts: one text per session (what the M* paper and its reference code
write: all of a session's turns under the session's date), or one text per turn.

Either way every turn stays an evidence unit under its own id, located in the text that holds it, so
questions keep citing turns and a memory's failures can still be traced to the turn that was needed.

    session: id "S3", text "[7:55 pm on 9 June, 2023]\\nCaroline: Hi Mel!\\nMelanie: Hey! ..."
    turn:    id "D3:1", text "[7:55 pm on 9 June, 2023] Caroline: Hi Mel!"
"""

from __future__ import annotations

from typing import Literal, get_args

from mstar_ray.exit_codes import InputError
from mstar_ray.tasks.model import EvidenceUnit, RawText

Granularity = Literal["session", "turn"]
GRANULARITIES: tuple[str, ...] = get_args(Granularity)


def granularity_suffix(granularity: Granularity) -> str:
    """What a task's name gains when its texts are not sessions, so two cuts of one task never share a name."""
    return "" if granularity == "session" else f"/{granularity}s"


def session_id(number: int) -> str:
    return f"S{number}"


def dialogue_texts(number: int, date: str, turns: list[tuple[str, str]], granularity: Granularity) -> list[RawText]:
    """The raw texts of session ``number`` said on ``date``; ``turns`` are (turn id, "Speaker: words")."""
    header = f"[{date}]"
    if granularity == "turn":
        lead = header + " "
        return [RawText(id=turn_id, text=lead + line, units=[EvidenceUnit(id=turn_id, start=len(lead),
                                                                          end=len(lead) + len(line))])
                for turn_id, line in turns]
    if granularity != "session":
        raise InputError(f"granularity must be one of {', '.join(GRANULARITIES)}, got {granularity!r}")
    if not turns:
        return []
    # One line per turn: a turn's own line breaks (a few in LoCoMo) would split it.
    turns = [(turn_id, " ".join(line.splitlines())) for turn_id, line in turns]
    units: list[EvidenceUnit] = []
    position = len(header) + 1
    for turn_id, line in turns:
        units.append(EvidenceUnit(id=turn_id, start=position, end=position + len(line)))
        position += len(line) + 1
    text = "\n".join([header, *(line for _, line in turns)])
    return [RawText(id=session_id(number), text=text, units=units)]
