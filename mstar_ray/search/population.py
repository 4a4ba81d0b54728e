"""The population: every valid candidate with its static score, append-only (how a parent is chosen from it:
``search.parents``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mstar_ray.results import ItemResult
from mstar_ray.program_id import ProgramIdentity


class Member(ProgramIdentity):
    """A program in the population: its identity, fitness, and what reflection on it reads."""

    score: float  # mean over the static set: the fitness J
    results: list[ItemResult] = []  # static and rotating, for failure and success cases
    write_example: dict[str, Any] | None = None  # one write() call's item, as the program received it
    tokens: int = 0  # prompt and completion tokens its evaluation's model calls took (a cache hit takes none)


def answers_of(results: Iterable[ItemResult]) -> dict[str, str]:
    return {r.id: r.prediction for r in results}


def same_answers(mine: Mapping[str, str], theirs: Mapping[str, str]) -> bool:
    """The same answer to every question both were asked, and at least one was: to the task agent, one program
    is the other again (how the population tells a child that changed nothing, and the cascade one it need
    not evaluate fully)."""
    shared = mine.keys() & theirs.keys()
    return bool(shared) and all(mine[q] == theirs[q] for q in shared)


class Population:
    def __init__(self) -> None:
        self.members: list[Member] = []
        self._by_id: dict[str, Member] = {}
        self._doubles: set[str] = set()  # members that answer as their parent does (``distinct``)

    def __len__(self) -> int:
        return len(self.members)

    def __contains__(self, member_id: str) -> bool:
        return member_id in self._by_id

    def get(self, member_id: str) -> Member:
        return self._by_id[member_id]

    def add(self, member: Member) -> None:
        if member.id in self._by_id:
            raise ValueError(f"candidate {member.id} is already in the population")
        self.members.append(member)
        self._by_id[member.id] = member
        if self._answers_as_parent(member):
            self._doubles.add(member.id)

    def best(self) -> Member:
        """Highest static score; the earlier member wins a tie, so seeds beat copies of themselves."""
        if not self.members:
            raise ValueError("the population is empty")
        return max(self.members, key=lambda m: (m.score, -self.members.index(m)))

    def distinct(self) -> list[Member]:
        """The members less those that answer as their parent does: the same answer to every question both were
        asked. Such a child changed nothing the task agent acts on (a prompt an agent ignores, the order of a
        list nothing reads in order); to parent selection it is its parent again, so it is not drawn twice."""
        return [m for m in self.members if m.id not in self._doubles]

    def _answers_as_parent(self, member: Member) -> bool:
        parent = self._by_id.get(member.parent) if member.parent is not None else None
        return (parent is not None and parent.score == member.score
                and same_answers(answers_of(member.results), answers_of(parent.results)))

    def ancestors(self, member_id: str) -> list[Member]:
        """From the seed down to the member's parent."""
        line: list[Member] = []
        current = self._by_id[member_id].parent
        while current is not None and current in self._by_id:
            line.append(self._by_id[current])
            current = self._by_id[current].parent
        return list(reversed(line))

    def relatives(self, member_id: str, among: Iterable[Member]) -> list[tuple[Member, Member]]:
        """(relative, common ancestor) for each of ``among`` that descends by another line from a proper ancestor
        of the member (the nearest one they share) and scores above it; the largest gain first."""
        line = {m.id for m in self.ancestors(member_id)}
        found = []
        for other in among:
            if other.id == member_id or other.id in line:
                continue
            theirs = self.ancestors(other.id)
            if any(m.id == member_id for m in theirs):
                continue  # a descendant: its change is already made on top of this member
            shared = [m for m in theirs if m.id in line]
            if shared and other.score > shared[-1].score:
                found.append((other, shared[-1]))
        return sorted(found, key=lambda pair: (pair[1].score - pair[0].score, pair[0].id))
