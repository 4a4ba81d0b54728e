"""Which program a run returns: the best seed, replaced only by a child that is better beyond the noise.

The static score is a mean over a few dozen questions, and the highest of many noisy means is mostly
luck: kept blindly, it returns a program that does worse on held-out questions than the seed it "beat".
So the run keeps an *incumbent*. While only seeds have been scored, it is the seed with the highest
static score. After that, a program replaces it only when a paired bootstrap over the static questions
(both programs scored on the same questions; ``mstar_ray.search.noise``) puts the whole interval of its
lead above zero. A program with a higher static score whose lead is within the noise is a *contender*;
at the end of the run the strongest contender and the incumbent are both evaluated on a confirmation
slice of validation questions that neither the fitness nor the reflector has seen, and the contender
is taken only if it scores higher there.

Parent selection is unchanged (softmax over static scores, as in the paper): this decides only what the
run reports and tests. Pure and deterministic: a resume, ``status`` and ``report`` replay it from the logs.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from mstar_ray.search.noise import LEVEL, RESAMPLES, bootstrap_interval, paired_interval
from mstar_ray.search.population import Member

Verdict = Literal["replaces", "contender", "kept"]


class Challenge(BaseModel):
    """One program set against the incumbent of its time."""

    challenger: str
    incumbent: str | None  # None: the first program scored
    lead: float | None = None  # challenger's static score minus the incumbent's
    low: float | None = None  # paired bootstrap interval of the lead
    high: float | None = None
    verdict: Verdict


class Confirmation(BaseModel):
    """The incumbent and the strongest contender on the confirmation slice."""

    incumbent: str
    contender: str
    questions: int
    incumbent_score: float
    contender_score: float

    @property
    def winner(self) -> str:
        return self.contender if self.contender_score > self.incumbent_score else self.incumbent


class Selection(BaseModel):
    chosen: str
    rule: Literal["best seed", "paired bootstrap", "confirmation"]
    how: str  # one sentence for summary.json and the report
    replacements: list[Challenge]  # every time the incumbent changed, in order
    confirmation: Confirmation | None = None


def static_scores(member: Member, static_ids: list[str]) -> list[float]:
    """The member's score on each static question, in ``static_ids`` order (0 for one it has no result on)."""
    by_id = {r.id: r.score for r in member.results}
    return [by_id.get(q, 0.0) for q in static_ids]


class Incumbent:
    """The program the run would return now, updated as each evaluated program is offered."""

    def __init__(self, static_ids: list[str], *, seed: int, level: float = LEVEL, resamples: int = RESAMPLES):
        if not static_ids:
            raise ValueError("the static set is empty: there is nothing to compare programs on")
        self.static_ids = list(static_ids)
        self.seed, self.level, self.resamples = seed, level, resamples
        self.best: Member | None = None
        self.replacements: list[Challenge] = []
        self._offered: list[tuple[Member, list[float], float]] = []

    def interval(self, member: Member) -> tuple[float, float]:
        """The bootstrap interval of the member's static score."""
        return bootstrap_interval(static_scores(member, self.static_ids), seed=self.seed, resamples=self.resamples,
                                  level=self.level)

    def _mean(self, scores: list[float]) -> float:
        return sum(scores) / len(scores)

    def _challenge(self, member: Member, scores: list[float]) -> Challenge:
        assert self.best is not None
        best_scores = static_scores(self.best, self.static_ids)
        low, high = paired_interval(scores, best_scores, seed=self.seed, resamples=self.resamples, level=self.level)
        lead = self._mean(scores) - self._mean(best_scores)
        verdict: Verdict = "replaces" if low > 0.0 else "contender" if lead > 0.0 else "kept"
        return Challenge(challenger=member.id, incumbent=self.best.id, lead=lead, low=low, high=high, verdict=verdict)

    def offer(self, member: Member) -> Challenge:
        scores = static_scores(member, self.static_ids)
        self._offered.append((member, scores, self._mean(scores)))
        if self.best is None:
            challenge = Challenge(challenger=member.id, incumbent=None, verdict="replaces")
        else:
            challenge = self._challenge(member, scores)
            if member.origin == "seed" and self.best.origin == "seed":
                # Seeds are the baseline, not challengers: among them the higher static score is the start.
                higher = challenge.lead is not None and challenge.lead > 0.0
                challenge = challenge.model_copy(update={"verdict": "replaces" if higher else "kept"})
        if challenge.verdict == "replaces":
            self.best = member
            self.replacements.append(challenge)
        return challenge

    def contender(self) -> Challenge | None:
        """The program with the highest static score above the incumbent's, set against the incumbent now
        (None if the incumbent has the highest); the earlier program wins a tie."""
        if self.best is None:
            return None
        top = self._mean(static_scores(self.best, self.static_ids))
        above = [(mean, -i, member, scores) for i, (member, scores, mean) in enumerate(self._offered)
                 if mean > top and member.id != self.best.id]
        if not above:
            return None
        _, _, member, scores = max(above, key=lambda entry: entry[:2])
        return self._challenge(member, scores)

    def select(self, confirmation: Confirmation | None = None) -> Selection:
        """The run's final program. A contender that is now better beyond the noise replaces the incumbent;
        otherwise ``confirmation`` (if the contender and the incumbent could be confirmed) decides."""
        if self.best is None:
            raise ValueError("no program has been offered")
        contender = self.contender()
        if contender is not None and contender.verdict == "replaces":
            self.best = next(m for m, _, _ in self._offered if m.id == contender.challenger)
            self.replacements.append(contender)
            contender = self.contender()
        best = self.best
        if contender is None or confirmation is None:
            waiting = "" if contender is None else (
                f"; {contender.challenger} scored {contender.lead:+.3f} higher on the static set, within the noise "
                f"[{contender.low:+.3f}, {contender.high:+.3f}], and there was no confirmation slice to settle it")
            if best.origin == "seed":
                how = f"the best seed {best.id} by static score: no child was better beyond the noise{waiting}"
                return Selection(chosen=best.id, rule="best seed", how=how, replacements=self.replacements)
            last = self.replacements[-1]
            if last.incumbent is None:  # no seed left (each failed or was passed over): the first program scored
                how = f"{best.id} has the highest static score of the programs left, none of them a seed{waiting}"
            else:
                how = (f"{best.id} replaced {last.incumbent} with a static lead of {last.lead:+.3f}, paired bootstrap "
                       f"{self.level:.0%} interval [{last.low:+.3f}, {last.high:+.3f}] above zero{waiting}")
            return Selection(chosen=best.id, rule="paired bootstrap", how=how, replacements=self.replacements)
        if {confirmation.incumbent, confirmation.contender} != {best.id, contender.challenger}:
            raise ValueError("the confirmation is not of the incumbent and the contender")
        winner = confirmation.winner
        how = (f"{contender.challenger} scored {contender.lead:+.3f} higher than {best.id} on the static set, within "
               f"the noise [{contender.low:+.3f}, {contender.high:+.3f}]; on {confirmation.questions} fresh validation "
               f"questions the contender scored {confirmation.contender_score:.3f} and the incumbent "
               f"{confirmation.incumbent_score:.3f}, so {winner} was kept")
        return Selection(chosen=winner, rule="confirmation", how=how, replacements=self.replacements,
                         confirmation=confirmation)

    def without(self, excluded: set[str]) -> Incumbent | None:
        """The incumbent as if the ``excluded`` programs had never been offered (None when none is left): the
        next program by the same rule, for a run whose choice broke the contract after the search."""
        kept = [member for member, _, _ in self._offered if member.id not in excluded]
        if not kept:
            return None
        incumbent = Incumbent(self.static_ids, seed=self.seed, level=self.level, resamples=self.resamples)
        for member in kept:
            incumbent.offer(member)
        return incumbent


def replay(members: list[Member], static_ids: list[str], *, seed: int) -> Incumbent:
    """The incumbent after offering ``members`` in the order they were scored (what the run saw)."""
    incumbent = Incumbent(static_ids, seed=seed)
    for member in members:
        incumbent.offer(member)
    return incumbent
