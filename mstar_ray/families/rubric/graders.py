"""Who decides whether a response meets one rubric criterion: the run's judge model, or, when no judge is
configured, the offline stand-in grader, which exists for CI only and names itself in everything it produces.

The judge is asked one criterion at a time (as HealthBench and PRBench grade), the conversation and the response
first and the criterion last, so a server that caches prompt prefixes reads the shared part once per response.
Its verdict is JSON ``{"explanation": ..., "criteria_met": true|false}``; a reply that does not say is sent back
once with what was wrong, and if the second reply does not say either the verdict is unreadable (``met`` None),
never guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

from mstar_ray import text as tx
from mstar_ray.llm.structured import parse_json_object
from mstar_ray.families.rubric.conversations import Criterion

if TYPE_CHECKING:
    from mstar_ray.llm.client import LLMClient

STAND_IN_LABEL = "OFFLINE STAND-IN GRADER (content-word coverage, not an LLM judge; for CI only)"
GRADE_MAX_TOKENS = 160
RESPONSE_CHARS = 6000  # of the response shown to the judge (its start: a response is read from the top)
NOTE_CHARS = 200

GRADE_PROMPT = """You check one response against one rubric criterion.

Conversation:
{conversation}

Response to check (the assistant's next message):
{response}

A criterion with positive points describes something a good response does; one with negative points describes
something a response must not do. Either way, "criteria_met" is true when the response does what the criterion
says (for a negative criterion: when the response makes that mistake), and false otherwise. A criterion with
several parts is met only when all of them are; examples after "such as" or "for example" need not all appear.
Reply with one JSON object: {{"explanation": "one short sentence", "criteria_met": true or false}}

Criterion ({points:+g} points): {criterion}"""

CORRECTION = ('That reply does not say whether the criterion is met. Reply with only the JSON object '
              '{"explanation": "...", "criteria_met": true or false}.')


class Verdict(NamedTuple):
    met: bool | None  # None: the judge's verdict could not be read
    note: str  # the judge's explanation, what the stand-in measured, or why the verdict is unreadable


class Grader(Protocol):
    label: str  # who graded, as every trace says

    def __call__(self, conversation: str, response: str, criterion: Criterion) -> Verdict: ...


def read_verdict(reply: str) -> Verdict:
    """The verdict in a judge's reply: ``criteria_met`` as a JSON boolean (or the string true/false)."""
    obj, problem = parse_json_object(reply)
    if obj is None:
        return Verdict(None, f"unreadable ({problem}): {reply.strip()[:NOTE_CHARS]!r}")
    met = obj.get("criteria_met")
    if isinstance(met, str) and met.strip().lower() in ("true", "false"):
        met = met.strip().lower() == "true"
    if not isinstance(met, bool):
        return Verdict(None, f"unreadable (no true or false criteria_met): {reply.strip()[:NOTE_CHARS]!r}")
    return Verdict(met, str(obj.get("explanation", "")).strip()[:NOTE_CHARS])


class JudgeGrader:
    """The run's judge model, through its ``LLMClient`` (the run's limits, cache, budget and call log)."""

    def __init__(self, client: LLMClient):
        self.client = client
        self.label = f"LLM judge {client.model}"

    def __call__(self, conversation: str, response: str, criterion: Criterion) -> Verdict:
        prompt = GRADE_PROMPT.format(conversation=conversation, response=response[:RESPONSE_CHARS],
                                     points=criterion.points, criterion=criterion.text)
        messages = [{"role": "user", "content": prompt}]
        reply = self.client.complete(messages, step="grade", json_mode=True, max_tokens=GRADE_MAX_TOKENS).text
        verdict = read_verdict(reply)
        if verdict.met is None:
            messages += [{"role": "assistant", "content": reply[:1000]}, {"role": "user", "content": CORRECTION}]
            reply = self.client.complete(messages, step="grade", json_mode=True, max_tokens=GRADE_MAX_TOKENS).text
            verdict = read_verdict(reply)
        return verdict


# How rubrics phrase what a response should do; these words say nothing about its content, so the stand-in
# does not look for them in the response.
_RUBRIC_WORDS = frozenset(tx.stem(w) for w in """
    response responds respond answer user users tell tells mention mentions state states recommend recommends advise advises
    suggest suggests include includes explain explains provide provides ask asks fail fails clearly correctly
    appropriately appropriate accurately accurate specific specifically briefly directly explicitly
""".split())
COVERAGE = 0.5  # share of a criterion's content words the response must contain for the stand-in to call it met


def criterion_terms(text: str) -> list[str]:
    """The content words (stems) of a criterion the stand-in looks for, in order, each once."""
    return list(dict.fromkeys(t for t in tx.content_stems(text) if t not in _RUBRIC_WORDS))


class StandInGrader:
    """For CI, where no judge model runs: a criterion is met when the response holds at least half of its
    content words. It reads words, not meaning (a response that says "do not call" meets "calls"), so its
    scores only compare memories against each other; every output it produces says so."""

    label = STAND_IN_LABEL

    def __call__(self, conversation: str, response: str, criterion: Criterion) -> Verdict:
        wanted = criterion_terms(criterion.text)
        if not wanted:
            return Verdict(None, "stand-in: the criterion has no content words to look for")
        present = set(tx.content_stems(response))
        found = [t for t in wanted if t in present]
        met = len(found) >= COVERAGE * len(wanted)
        return Verdict(met, f"stand-in: {len(found)} of its {len(wanted)} content words in the response")


def grader_for(judge: LLMClient | None) -> Grader:
    return JudgeGrader(judge) if judge is not None else StandInGrader()
