"""The reflector's instructions as a small population that evolves (``search.guidance``).

The instruction is the paragraph of the reflection prompt that says what to do with what it shows (the
``ask`` of ``reflect.prompt``). Each improve reflection draws one text from the population (a bandit on the
gain of the children it led to, ``reflect.ensemble.choose`` with no price); every ``rewrite_every`` judged
reflections the worst text is rewritten from the best by the reflector model (``rewrite_messages``) or, with
no model, by the offline stand-in (``offline_rewrite``), and the new text takes the worst one's place. The
texts, the draws and the rewrites are logged as transitions and rebuilt from the logs on a resume. Pure.
"""

from __future__ import annotations

import hashlib
import random
import re

from pydantic import BaseModel

from mstar_ray.reflect.ensemble import Arm

# Our own starting texts; the first is the prompt's fixed instruction, so that a run with one text asks what a
# run without evolving instructions asks.
SEED_GUIDANCE: tuple[str, ...] = (
    "Find why the failed cases failed (storage, retrieval, or answering) and change the program so that "
    "questions like them are answered; avoid repeating changes that regressed.",
    "Pick the one stage where most failures went wrong and make a small, targeted change there; keep what the "
    "successful case relies on.",
    "Look at what read() returned for the failed cases and change how records are found or ranked so that the "
    "evidence they need comes back first.",
    "Change what write() keeps: store the facts the failed questions ask about in a form read() can match, "
    "with their dates and names.",
)
MAX_CHARS = 600  # of a rewritten text: an instruction, not an essay
# The offline stand-in's phrases: what it adds to the best text when it rewrites the worst (no model).
_STANDIN_PHRASES = (
    "Prefer a change that helps many failed questions over one that fixes a single case.",
    "State in the commit message which failure the change addresses.",
    "When a change regressed, try the opposite direction or another stage.",
    "Keep the program's interface and size; change as little code as the fix needs.",
    "Use the history: do not try again what left the program as it was.",
)


class GuidanceText(BaseModel):
    id: str
    text: str


class Rewrite(BaseModel):
    """A meta-step asked of a reflector: rewrite ``worst`` from ``best`` (each with its record so far)."""

    best: GuidanceText
    worst: GuidanceText
    best_arm: Arm
    worst_arm: Arm


def guidance_id(text: str) -> str:
    return "g-" + hashlib.sha1(text.encode()).hexdigest()[:8]


def seed_texts(size: int) -> list[GuidanceText]:
    return [GuidanceText(id=guidance_id(text), text=text) for text in SEED_GUIDANCE[:size]]


def rewrite_due(arms: list[Arm], texts: dict[str, str], judged: int, every: int, rewrites: int) -> Rewrite | None:
    """The worst of the current ``texts`` (lowest mean gain; ``arms`` their records) to rewrite from the best,
    once every ``every`` judged reflections of the run (``judged`` so far, ``rewrites`` made); none while fewer
    than two texts have been judged or none is better than another."""
    scored = [a for a in arms if a.model in texts and a.judged > 0]
    if len(scored) < 2 or judged < every * (rewrites + 1):
        return None
    ranked = sorted(scored, key=lambda a: (a.gain / a.judged, a.judged))
    worst, best = ranked[0], ranked[-1]
    if best.gain / best.judged <= worst.gain / worst.judged:
        return None
    return Rewrite(best=GuidanceText(id=best.model, text=texts[best.model]),
                   worst=GuidanceText(id=worst.model, text=texts[worst.model]), best_arm=best, worst_arm=worst)


def rewrite_messages(rewrite: Rewrite) -> list[dict[str, str]]:
    """The meta-step's prompt for the reflector model."""
    def record(arm: Arm) -> str:
        return (f"{arm.judged} reflections judged, {arm.entered} children entered the population, summed lead over "
                f"their parents +{arm.lead:.3f}")
    return [
        {"role": "system", "content": "You improve the instruction given to a model that edits memory programs "
         "to raise their score. Reply with the new instruction only, in at most 80 words, no preamble."},
        {"role": "user", "content": f"The better instruction ({record(rewrite.best_arm)}):\n{rewrite.best.text}\n\n"
         f"The worse instruction ({record(rewrite.worst_arm)}):\n{rewrite.worst.text}\n\nWrite a new instruction "
         "that keeps what makes the better one work and tries one idea of its own; it replaces the worse one."},
    ]


def read_rewrite(reply: str) -> str | None:
    """The new text from a model's reply: its first paragraph of prose, cut to ``MAX_CHARS``; none if empty."""
    text = re.sub(r"^```\w*|```$", "", reply.strip()).strip()
    text = re.sub(r"^(new instruction|instruction)\s*:\s*", "", text, flags=re.IGNORECASE)
    text = " ".join(text.split())[:MAX_CHARS].strip()
    return text or None


def offline_rewrite(rewrite: Rewrite, seed: int) -> str:
    """The stand-in meta-step (no model): the best text with one phrase it does not hold yet, drawn by ``seed``."""
    fresh = [p for p in _STANDIN_PHRASES if p not in rewrite.best.text] or list(_STANDIN_PHRASES)
    return f"{rewrite.best.text} {random.Random(seed).choice(fresh)}"[:MAX_CHARS]
