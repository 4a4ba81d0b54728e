"""Whether asks for resources fit a cluster's nodes: each ask must land whole on one node (a replica is one
actor), first fit, largest asks first. Pure, so it is tested without Ray; the driver gives it the nodes."""

from __future__ import annotations

Resources = dict[str, float]


def place(asks: list[tuple[str, Resources]], nodes: list[Resources]) -> tuple[str | None, list[Resources]]:
    """Place every ``(label, ask)`` on ``nodes`` (their total resources); the label of the first ask that
    fits no node (``None`` when all fit) and what is left on each node after those placed."""
    left = [dict(node) for node in nodes]
    for label, ask in sorted(asks, key=lambda item: -sum(item[1].values())):
        node = next((n for n in left if all(n.get(name, 0.0) + 1e-9 >= amount for name, amount in ask.items())), None)
        if node is None:
            return label, left
        for name, amount in ask.items():
            node[name] = node.get(name, 0.0) - amount
    return None, left


def fits_somewhere(ask: Resources, nodes: list[Resources]) -> bool:
    return place([("ask", ask)], nodes)[0] is None


def describe(resources: Resources) -> str:
    shown = {name: amount for name, amount in sorted(resources.items())
             if amount > 0 and not name.startswith(("node:", "memory", "object_store_memory"))}
    return ", ".join(f"{name} {amount:g}" for name, amount in shown.items()) or "nothing"
