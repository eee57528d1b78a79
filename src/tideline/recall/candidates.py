"""The candidate of a recall: one memory or turn under consideration, and its evidence.

The type every stage of the recall path shares (gathering, scoring, the graph spread,
the turn rules, sentence vectors), kept below all of them so none imports the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Candidate", "Candidates", "in_time"]


@dataclass
class Candidate:
    """A memory or turn under consideration, with the evidence gathered for it."""

    type: Literal["memory", "turn"]
    key: int
    source: str
    similarity: float = 0.0
    lexical_rank: int | None = None
    keyword: float = 0.0
    score: float = 0.0
    hub: float = 0.0
    asked: float = 1.0  # the question discount's factor (1 for a turn that only tells)
    focus: float | None = None  # cosine to the query without its names (recall/focus.py)


#: A recall's candidates by ``(type, key)``.
Candidates = dict[tuple[str, int], Candidate]


def in_time(ts: float | None, since: float | None, until: float | None) -> bool:
    """Whether ``ts`` lies in ``[since, until]`` (an undated item only when unbounded).

    Args:
        ts: the item's time (epoch seconds), or None.
        since: lower bound, or None.
        until: upper bound, or None.

    Returns:
        True when the item passes the time filter.
    """
    if ts is None:
        return since is None and until is None
    if since is not None and ts < since:
        return False
    return not (until is not None and ts > until)
