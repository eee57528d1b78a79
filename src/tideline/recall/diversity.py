"""Session diversity for a question asked across time.

"How many kitchen items did I replace?", "How long have I been in my role?", "Which
did I set up first, the thermostat or the router?" are answered by turns of several
sessions, one fact each, told weeks apart. A ranking by relevance alone fills its
first places with the one session that talks most about the topic. For such a
question recall multiplies every turn but its session's best by ``session_decay``, so
the best turns of other sessions come up between them. The order inside a session is
kept. Once, not per better turn: compounding (0.8 per turn above) pushed single-session
answers of a long two-person chat out of the first ten (LoCoMo dev R@10 −0.007), a
single step costs it −0.003 (docs/lab/recall-generalisation.md).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence

__all__ = ["asks_across", "session_factors"]

# Counting, durations, frequency, order in time, totals: English question words.
_ACROSS = re.compile(
    r"\bhow\s+(?:many|much|long|often)\b|\b(?:first|in\s+total|so\s+far|times)\b",
    re.IGNORECASE)


def asks_across(query: str) -> bool:
    """Whether ``query`` asks across time: a count, a total, a duration, a frequency,
    or which of several things came first.

    Args:
        query: the recall query.

    Returns:
        True for "How many times did I…", "Which did I start first…".
    """
    return _ACROSS.search(query) is not None


def session_factors(sessions: Sequence[Hashable], decay: float) -> list[float]:
    """The factor of each item of a ranking (best first) given its session.

    Args:
        sessions: each item's session, in rank order.
        decay: the factor of an item ranked below another of its session (0–1).

    Returns:
        1 for each session's first item, ``decay`` for the others, in order.
    """
    seen: dict[Hashable, int] = {}
    out = []
    for sess in sessions:
        n = seen.get(sess, 0)
        out.append(decay if n else 1.0)
        seen[sess] = n + 1
    return out
