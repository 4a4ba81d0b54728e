"""The search's state, Ray-free: the population, what became of every child tried from each parent, every
id ever queued, the candidates waiting for a result, the reflections open, and the counts behind the
budgets. It changes only through ``apply(transition)``: the live driver applies each transition as it logs it,
and a resume (or ``status``, ``report``, ``export``) replays the logged ones through the same method, so the
rules of the search are written once.
"""

from __future__ import annotations

import collections
from typing import Any
from dataclasses import dataclass, field

from mstar_ray.llm.ledger import RoleUsage
from mstar_ray.program_ast import changed_pieces
from mstar_ray.reflect.request import ALREADY_EVALUATED, LineageEntry, inert_parts
from mstar_ray.search.population import Member, Population
from mstar_ray.search.stop import StopReason
from mstar_ray.state.candidate import Candidate
from mstar_ray.state.transitions import (
    Discarded, Duplicate, Evaluated, Failed, GuidanceRewritten, Queued, ReflectionStarted, Retried, Screened, Stopped,
    Transition,
    Violated,
)

# Origins whose program closes the reflection of its iteration (a runtime fix answers a violation, not an
# iteration's reflection; a seed answers none).
_NOT_FROM_A_REFLECTION = ("seed", "runtime-fix")
# A part changed without effect this many times across the run (and never with one) is a lesson for every
# reflection; one child is a lesson for its parent's reflections alone (its lineage).
RUN_INERT_CHILDREN = 2


@dataclass
class SearchState:
    population: Population = field(default_factory=Population)
    # By parent id: what became of each child reflected from it (its score and delta, a violation, a discard,
    # a duplicate), shown in the next reflection prompt on that parent so it does not try the same again.
    child_notes: dict[str, list[LineageEntry]] = field(default_factory=lambda: collections.defaultdict(list))
    seen: set[str] = field(default_factory=set)  # every id ever queued: none is evaluated twice
    # The same ids in the order they were queued: a resume re-learns every one of them for the structural
    # dedup, whatever became of it (a child repeating a violated program's structure is a duplicate live, so
    # it must be one after a resume too), in the order the live index learnt them.
    queued: list[str] = field(default_factory=list)
    pending: dict[str, Candidate] = field(default_factory=dict)  # queued, in queue order, with no result yet
    open_reflections: set[int] = field(default_factory=set)  # improve reflections started, with no child yet
    reflector_models: dict[int, str] = field(default_factory=dict)  # by iteration: the ensemble model it went to
    guidance_of: dict[int, str] = field(default_factory=dict)  # by iteration: the instruction drawn for it
    guidance_rewrites: list[GuidanceRewritten] = field(default_factory=list)  # in the order they were made
    iterations: int = 0  # improve reflections started
    evaluated: int = 0  # children with a result (scored, violation, failed or screened out); seeds are not counted
    screened_out: int = 0  # children the cascade stopped after their slice
    # By program id: its score on the cascade's slice (search.cascade), which the next children are held to.
    screen_scores: dict[str, float] = field(default_factory=dict)
    screen_answers: dict[str, dict[str, str]] = field(default_factory=dict)  # and its answers there, by question
    discarded: int = 0
    violations: int = 0
    duplicates: int = 0
    crashes: collections.Counter[str] = field(default_factory=collections.Counter)  # evaluator deaths per id
    # By the id of a program still being evaluated: where the notes of children that repeat it stand (parent id,
    # place in its notes), to be given its score when it finishes.
    awaiting: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    stop: StopReason | None = None
    # Filled by a replay only (live, the LLM gateway counts usage and the process its own wall time).
    usage: dict[str, RoleUsage] = field(default_factory=dict)
    reflector_usage: dict[str, RoleUsage] = field(default_factory=dict)  # the reflector role's, by model
    wall_s: float = 0.0

    @property
    def members(self) -> list[Member]:
        return self.population.members

    @property
    def queue(self) -> list[Candidate]:
        return list(self.pending.values())

    @property
    def reflections(self) -> list[int]:
        """Improve reflections started and never answered (a resume re-issues them, in order)."""
        return sorted(self.open_reflections)

    def best_seed_score(self) -> float | None:
        seeds = [m.score for m in self.population.members if m.origin == "seed"]
        return max(seeds) if seeds else None

    def lineage(self, parent: Member) -> list[LineageEntry]:
        """What a reflection on ``parent`` is shown: its line of descent, then every child tried from it."""
        entries = []
        for member in [*self.population.ancestors(parent.id), parent]:
            before = self.population.get(member.parent).score if member.parent is not None and member.parent in self.population else None
            entries.append(LineageEntry(
                id=member.id, relation="parent" if member is parent else "ancestor",
                commit_message=member.commit_message, score=member.score,
                delta=None if before is None else member.score - before))
        return entries + self.child_notes[parent.id]

    def inert_parts(self) -> list[str]:
        """Parts of programs that children across the run changed without moving a score, at least
        ``RUN_INERT_CHILDREN`` times and never with a score moving: the run's lesson for every reflection."""
        children = (entry for notes in self.child_notes.values() for entry in notes)
        return sorted(inert_parts(children, at_least=RUN_INERT_CHILDREN))

    def score_of(self, program_id: str) -> float | None:
        return self.population.get(program_id).score if program_id in self.population else None

    # ------------------------------------------------------------------------------------- transitions

    def apply(self, transition: Transition) -> None:
        match transition:
            case Queued(candidate=candidate):
                self.seen.add(candidate.id)
                self.queued.append(candidate.id)
                self.pending[candidate.id] = candidate
                self._answered(candidate)
            case ReflectionStarted(iteration=iteration, kind="improve", model=model, guidance=guidance):
                self.iterations = max(self.iterations, iteration)
                self.open_reflections.add(iteration)
                if model is not None:
                    self.reflector_models[iteration] = model
                if guidance is not None:
                    self.guidance_of[iteration] = guidance
            case ReflectionStarted():
                pass
            case Screened(candidate=candidate, score=score, bar=bar, passed=passed, answers=answers):
                self.screen_scores[candidate.id] = score
                if passed:
                    self.screen_answers[candidate.id] = answers
                else:
                    self._screened_out(transition)
            case Evaluated():
                self._evaluated(transition)
            case Violated(candidate=candidate, kind=kind):
                self._finished(candidate)
                self.violations += 1
                self._settle(candidate.id, 0.0, f"; that program broke the contract at run time: {kind}")
                if candidate.parent is not None:
                    self._note(candidate.parent, candidate, score=0.0, delta=-(self.score_of(candidate.parent) or 0.0),
                               note=f"runtime violation: {kind}")
            case Failed(candidate=candidate, error=error):
                self._finished(candidate)
                self._settle(candidate.id, None, "; that program's evaluation failed")
                if candidate.parent is not None:
                    self._note(candidate.parent, candidate, note=f"evaluation failed: {error[:200]}")
            case Duplicate():
                self._duplicate(transition)
            case Discarded():
                self.discarded += 1
                if transition.kind == "improve":
                    self.open_reflections.discard(transition.iteration)
                self.child_notes[transition.parent].append(LineageEntry(
                    id="-", relation="child", commit_message="(no valid child)",
                    note=transition.errors[-1][:200] if transition.errors else transition.reason))
            case Retried(candidate=candidate) if candidate is not None:
                self.crashes[candidate] += 1
            case Retried():
                pass
            case GuidanceRewritten():
                self.guidance_rewrites.append(transition)
            case Stopped(reason=kind, message=message):
                self.stop = StopReason(kind, message)
            case _:
                raise TypeError(f"not a search transition: {transition!r}")

    def _answered(self, candidate: Candidate) -> None:
        if candidate.origin not in _NOT_FROM_A_REFLECTION:
            self.open_reflections.discard(candidate.iteration)

    def _screened_out(self, done: Screened) -> None:
        candidate = done.candidate
        self._finished(candidate)
        self.screened_out += 1
        self._settle(candidate.id, None, "; that program was screened out")
        if candidate.parent is None:
            return
        if done.repeats_parent:
            why = ("it gave its parent's answer to every question of the cascade's slice of the static questions: "
                   "to the task agent nothing changed")
        else:
            why = (f"{done.score:.3f} on the cascade's slice of the static questions, below the {done.bar:.3f} "
                   "needed to go on to the rest")
        self._note(candidate.parent, candidate, note=f"screened out: {why}")

    def _finished(self, candidate: Candidate) -> None:
        self.pending.pop(candidate.id, None)
        if candidate.origin != "seed":
            self.evaluated += 1

    def _note(self, parent: str, candidate: Candidate, **entry: Any) -> None:
        self.child_notes[parent].append(LineageEntry(
            id=candidate.id, relation="child", commit_message=candidate.commit_message, **entry))

    def _evaluated(self, done: Evaluated) -> None:
        candidate = done.candidate
        self._finished(candidate)
        self.population.add(Member(**candidate.identity(), score=done.score, results=done.results,
                                   write_example=done.write_example, tokens=done.tokens))
        self._settle(candidate.id, done.score)
        if candidate.origin != "seed" and candidate.parent is not None and candidate.parent in self.population:
            parent = self.population.get(candidate.parent)
            self._note(candidate.parent, candidate, score=done.score, delta=done.score - parent.score,
                       changed=changed_pieces(parent.source, candidate.source))

    def _duplicate(self, done: Duplicate) -> None:
        candidate = done.candidate
        if candidate.origin == "seed":
            return
        self.duplicates += 1
        self._answered(candidate)
        if candidate.parent is not None and candidate.parent in self.population:
            parent = self.population.get(candidate.parent)
            self._note(candidate.parent, candidate, score=done.score, delta=None if done.score is None else done.score - parent.score,
                       changed=changed_pieces(parent.source, candidate.source),
                       note=f"{done.how} to a program {ALREADY_EVALUATED}: change something that matters")
            if done.score is None and done.original in self.pending:
                notes = self.child_notes[candidate.parent]
                self.awaiting.setdefault(done.original, []).append((candidate.parent, len(notes) - 1))

    def _settle(self, program_id: str, score: float | None, why: str = "") -> None:
        """The children that repeat a program still being evaluated hear its outcome once it has one."""
        for parent, place in self.awaiting.pop(program_id, []):
            notes = self.child_notes[parent]
            delta = None if score is None else score - self.population.get(parent).score
            notes[place] = notes[place].model_copy(update={"score": score, "delta": delta,
                                                           "note": notes[place].note + why})
