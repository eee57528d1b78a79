"""Turn-level knowledge updates: of two turns that tell the same thing, the later first.

A person restates what changed ("I see Dr. Smith every two weeks" in April, "every
week now" in November; "38 pre-1920 coins" after "25"). Both turns match the question
about equally well (the same words, the same topic); the later one holds the value that
is true now, so it ranks first. Two turns count as telling the same thing when the same
speaker said them in different sessions, each holds at least ``coverage`` of the query's
keywords, and the later one scores at least ``ratio`` of the earlier one; then the later
one is put just above the earlier one. Only the first ``window`` turns are compared
(the gate's ``updates`` edges do the same for memories, recall/updates.py elsewhere).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Told", "later_first"]


@dataclass
class Told:
    """One ranked turn as this rule sees it."""

    key: int
    score: float
    speaker: tuple[str, str]  # (scope, speaker or role): who said it
    session: str
    time: float
    coverage: float  # share of the query's keywords the turn holds


def later_first(ranked: Sequence[Told], *, ratio: float, coverage: float,
                window: int = 10) -> dict[int, float]:
    """New scores for the later turns that restate an earlier, better-ranked one.

    Args:
        ranked: turns, best first.
        ratio: the least share of the earlier turn's score the later one needs (0: off).
        coverage: the least keyword coverage each of the two needs.
        window: how many of the first turns are compared.

    Returns:
        Turn key → its new score (just above the earlier turn's), for the turns moved.
    """
    if ratio <= 0:
        return {}
    top = [t for t in ranked[:window] if t.coverage >= coverage]
    moved: dict[int, float] = {}
    for i, early in enumerate(top):
        for late in top[i + 1:]:
            if (late.speaker == early.speaker and late.session != early.session
                    and late.time > early.time and late.key not in moved
                    and late.score >= ratio * early.score):
                moved[late.key] = math.nextafter(early.score, math.inf)
                break
    return moved
