"""What sleep built, read back for the facade: the attention heatmap, topic clusters, the
entity graph, and the scan of context not yet consolidated.

Each function checks its limits and the scopes asked for (the project's scopes, or with
``all_scopes`` every scope of the namespace) and reads through the store's sleep view;
none of them writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tideline.sleep.attention import heatmap
from tideline.sleep.scan import ScanResult, scan_unindexed
from tideline.store.consolidation import ConsolidationStore
from tideline.write.validate import clean_flag, clean_int

if TYPE_CHECKING:
    from tideline.runtime import Runtime

__all__ = ["attention_heatmap", "entity_graph", "scan", "topics"]


def _scopes(rt: Runtime, scope: str | None, all_scopes: object) -> list[str] | None:
    """The scopes a read answers from: the project's (with ``global``), or None for all."""
    return None if clean_flag(all_scopes, "all_scopes") else rt.visible(scope)


def attention_heatmap(rt: Runtime, *, scope: str | None, days: int, all_scopes: bool,
                      top: int) -> dict[str, Any]:
    """Which clusters recall lights up, and which are deserts (see :func:`heatmap`).

    Raises:
        InvalidInput: ``days`` or ``top`` out of range, or a malformed scope.
    """
    days = clean_int(days, "days", lo=1, hi=3650)
    top = clean_int(top, "top", lo=1, hi=1000)
    return heatmap(ConsolidationStore(rt.store), scopes=_scopes(rt, scope, all_scopes),
                   days=days, top=top)


def scan(rt: Runtime, *, gap_minutes: int | None, max_turns: int | None, scope: str | None,
         all_scopes: bool) -> ScanResult:
    """Unlinked memories and recent raw turns (see :func:`scan_unindexed`); limits default
    to ``SleepTuning``.

    Raises:
        InvalidInput: a limit out of range, or a malformed scope.
    """
    t = rt.config.sleep
    gap = t.scan_gap_minutes if gap_minutes is None else clean_int(
        gap_minutes, "gap_minutes", lo=1, hi=10**9)
    turns = t.scan_max_turns if max_turns is None else clean_int(
        max_turns, "max_turns", lo=1, hi=rt.config.caps.batch)
    return scan_unindexed(rt.store, gap_minutes=gap, max_turns=turns,
                          scopes=_scopes(rt, scope, all_scopes))


def topics(rt: Runtime, *, scope: str | None, limit: int,
           all_scopes: bool) -> list[dict[str, Any]]:
    """Topic clusters (keyword → memories), largest first.

    Raises:
        InvalidInput: ``limit`` out of range, or a malformed scope.
    """
    limit = clean_int(limit, "limit", lo=1, hi=1000)
    return ConsolidationStore(rt.store).topics(_scopes(rt, scope, all_scopes), limit)


def entity_graph(rt: Runtime, *, limit: int) -> dict[str, list[dict[str, Any]]]:
    """The entity graph: nodes (mentions, roles) and edges (role pairs).

    Raises:
        InvalidInput: ``limit`` out of range.
    """
    return ConsolidationStore(rt.store).entity_graph(clean_int(limit, "limit", lo=1, hi=10_000))
