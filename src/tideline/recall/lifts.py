"""A lifted neighbour never outranks the hit it was lifted from.

The neighbour rule and the carry across a question (:mod:`tideline.recall.across`)
raise the turns around a strong hit to a share of the hit's score, at most the hit's
own. The rules after them multiply scores turn by turn (the listener discount, the
answer lift, the role discount, the session diversity), so a neighbour can end up above
the very turn that brought it in: an assistant's answer that matched, discounted for a
question in the first person, below the user's turn lifted beside it. What the lift
found is the hit; the neighbour is context, so the hit keeps its place
(issue 29: "the turn the lift came from keeps its place").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping

__all__ = ["keep_sources"]


def keep_sources(scores: MutableMapping[int, float], lifted: Mapping[int, int]) -> list[int]:
    """Lower each lifted turn that scores as much as its source to just below it.

    Args:
        scores: turn id → final score (changed in place).
        lifted: turn id → id of the hit whose lift set its score.

    Returns:
        The ids lowered.
    """
    lowered: list[int] = []
    # A hit lifted by a stronger hit may itself be a source: repeat until no pair is out
    # of order (a lift never raises a turn above its source, so the pairs hold no cycle;
    # one pass per link of the longest chain, bounded by the number of pairs).
    for _ in range(len(lifted)):
        changed = False
        for turn, source in lifted.items():
            if turn in scores and source in scores and scores[turn] >= scores[source]:
                scores[turn] = math.nextafter(scores[source], -math.inf)
                lowered.append(turn)
                changed = True
        if not changed:
            break
    return lowered
