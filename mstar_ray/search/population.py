"""The population: every valid candidate with its static score, append-only (how a parent is chosen from it:
``search.parents``)."""

from __future__ import annotations

from mstar_ray.results import ItemResult
from mstar_ray.program_id import ProgramIdentity


class Member(ProgramIdentity):
    """A program in the population: its identity, fitness, and what reflection on it reads."""

    score: float  # mean over the static set: the fitness J
    results: list[ItemResult] = []  # static and rotating, for failure and success cases
    write_example: dict | None = None
    tokens: int = 0  # prompt and completion tokens its evaluation's model calls took (a cache hit takes none)


class Population:
    def __init__(self) -> None:
        self.members: list[Member] = []
        self._by_id: dict[str, Member] = {}

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

    def best(self) -> Member:
        """Highest static score; the earlier member wins a tie, so seeds beat copies of themselves."""
        if not self.members:
            raise ValueError("the population is empty")
        return max(self.members, key=lambda m: (m.score, -self.members.index(m)))

    def ancestors(self, member_id: str) -> list[Member]:
        """From the seed down to the member's parent."""
        line: list[Member] = []
        current = self._by_id[member_id].parent
        while current is not None and current in self._by_id:
            line.append(self._by_id[current])
            current = self._by_id[current].parent
        return list(reversed(line))
