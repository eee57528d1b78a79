"""The report's corrections: memories the novelty gate kept as updates of older ones.

A write that states a stored memory again with another value (a person, a number, a
negation) is stored as a new memory with an ``updates`` edge to the old one (see
:mod:`tideline.write.contrast`). The report lists the latest of the window, newest
first, with both texts, so a reader sees what changed and that nothing was lost.
"""

from __future__ import annotations

from typing import Any

from tideline.models import iso
from tideline.store.reporting import ReportStore

__all__ = ["corrections"]

_TEXT = 120


def corrections(rs: ReportStore, since: float, limit: int = 10) -> dict[str, Any]:
    """The ``updates`` edges made in the window: their count and the latest ``limit``.

    Args:
        rs: the report's store view.
        since: the window's start (epoch seconds).
        limit: how many to list.

    Returns:
        ``{"count": n, "latest": [{"new", "old", "new_text", "old_text", "at"}…]}``.
    """
    rows = rs.updates_edges(since)
    latest = [{"new": int(src), "old": int(dst), "at": iso(float(at)),
               "new_text": " ".join(str(new).split())[:_TEXT],
               "old_text": " ".join(str(old).split())[:_TEXT]}
              for src, dst, at, new, old in rows[:limit]]
    return {"count": len(rows), "latest": latest}
