"""The act step's offline stand-in: follow what memory shows, else explore.

The actions the retrieved context names (an expert transcript's ACTION lines, a note's "put X in Y") are
matched to the admissible actions by words; the untried admissible action most like one of them is taken,
ties going to the one named first, so the agent replays the order a similar episode showed. When nothing
untried is alike enough, it falls back to the fixed exploration (``mstar_ray.families.episode.actions.explore``). So
success rises with what memory returns: the right transcript, whole, in order.
"""

from __future__ import annotations

from collections import Counter

from mstar_ray.families.episode.actions import explore, likeness, named_actions, similarity, words
from mstar_ray.families.episode.turn import Choice, Turn
from mstar_ray.families.step import Shown

# Below this, an admissible action is not taken for the remembered one: on TWC an unseen object shares
# little more than its adjectives with a seen one, and a container named by its own words scores above it.
MIN_SIMILARITY = 0.3


def act(shown: Shown, turn: Turn) -> Choice:
    verbs = frozenset(words(action)[0] for action in turn.actions)
    # The retrieved context first: on equal likeness, what was retrieved for this episode leads.
    remembered = named_actions(shown.context or "", verbs) + named_actions(shown.always_on or "", verbs)
    taken = Counter(action for action, _ in turn.history)
    best: tuple[tuple[float, int], str] | None = None
    for action in turn.actions:
        if taken[action]:
            continue
        for position, phrase in enumerate(remembered):
            key = (similarity(action, phrase), -position)
            if key[0] >= MIN_SIMILARITY and (best is None or key > best[0]):
                best = (key, action)
    if best is not None:
        return Choice(best[1])
    return Choice(explore(turn, hint=lambda action: sum(likeness(action, phrase) for phrase in remembered)))
