"""The sleep gate, checkable without opening the store (for the CLI and the Stop hook).

A hook that runs after every answer must cost next to nothing when nothing
happened. :func:`quick_skip` reads the store's change marker (three ``max(id)``
lookups) and the marker the last sleep stored, through a read-only connection,
and imports neither numpy nor the embedders nor the recall engine.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tideline.models import iso
from tideline.store import peek_gate
from tideline.store.gate import GateView

__all__ = ["quick_skip", "skipped"]


def skipped(reason: str, view: GateView | None, started: float) -> dict[str, Any]:
    """The result of a sleep that did not run."""
    return {
        "skipped": True,
        "reason": reason,
        "last_sleep": iso(view.last_sleep) if view and view.last_sleep is not None else None,
        "marker": view.marker if view else None,
        "ms": round((time.perf_counter() - started) * 1000, 3),
    }


def quick_skip(home: Path, namespace: str, refresh_after_hours: float, *,
               database: str | None = None) -> dict[str, Any] | None:
    """The skipped-sleep result when nothing changed since the last sleep, else None.

    Args:
        home: the store directory.
        namespace: the namespace.
        refresh_after_hours: the gate opens anyway after this long.
        database: a ``postgresql://`` URL: the gate is read there (one connection, two
            queries) instead of in ``home``.

    Returns:
        ``{"skipped": True, "reason": "unchanged", …}`` or None (sleep must run).
    """
    started = time.perf_counter()
    view = peek_gate(home, namespace, database=database)
    if view is not None and view.unchanged(refresh_after_hours * 3600.0, time.time()):
        return skipped("unchanged", view, started)
    return None
