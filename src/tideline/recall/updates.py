"""Corrections in a recall packet: the newer statement first, and which one it updates.

When the novelty gate takes a write for a correction of a stored memory (the same
statement with another value: "Lena reviews …" after "Deniz reviews …"), it keeps both
and adds an ``updates`` edge from the new memory to the old one (see
:mod:`tideline.write.contrast`). Nothing is deleted, so a question may bring both back.
Here, after ranking, every memory item is told what it updates and what updates it
(:attr:`~tideline.models.RecallItem.updates`, :attr:`~tideline.models.RecallItem.updated_by`),
and when both ends of an ``updates`` edge are in the packet the newer one — by event
time, then record time, then id — is moved just above the older one. The rest of the
order is left as ranked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

from tideline.models import Edge, RecallItem

__all__ = ["EDGE", "apply", "newer_first"]

EDGE = "updates"
"""The edge kind of a correction: from the new memory (src) to the one it updates (dst)."""


class EdgeReader(Protocol):
    """The one store read this needs."""

    def edges_of(self, ids: Sequence[int], types: Sequence[str] | None = None) -> list[Edge]:
        """Edges touching any of ``ids``, of the given types."""


def _when(item: RecallItem) -> tuple[str, str, int]:
    # ISO-8601 UTC strings of one format: they order as the times do.
    return (item.event_time or item.recorded_at or "", item.recorded_at or "", int(item.id))


def newer_first(items: Sequence[RecallItem], edges: Sequence[Edge]) -> list[RecallItem]:
    """``items`` with each correction moved just above the memory it updates, when the
    older one ranks higher; the other items keep their order.

    Args:
        items: a ranked packet's items.
        edges: ``updates`` edges among them (others are ignored).

    Returns:
        The items, reordered.
    """
    out = list(items)
    pos = {int(i.id): n for n, i in enumerate(out) if i.type == "memory"}
    pairs = [(e.src, e.dst) for e in edges if e.type == EDGE and e.src in pos and e.dst in pos]
    for _ in range(len(pairs) + 1):  # a chain settles in as many passes as it has links
        moved = False
        for a, b in pairs:
            ia, ib = pos[a], pos[b]
            newer, older = (ia, ib) if _when(out[ia]) >= _when(out[ib]) else (ib, ia)
            if newer > older:
                out.insert(older, out.pop(newer))
                pos = {int(i.id): n for n, i in enumerate(out) if i.type == "memory"}
                moved = True
        if not moved:
            break
    return out


def apply(items: Sequence[RecallItem], store: EdgeReader, *,
          known: tuple[set[int], Sequence[Edge]] | None = None) -> tuple[RecallItem, ...]:
    """Mark what each memory item updates and is updated by, and put newer statements
    first (see the module's docstring). At most one edge read, none when no memory is
    listed or when ``known`` already holds the edges of every listed memory.

    Args:
        items: a ranked packet's items.
        store: the store to read the ``updates`` edges from.
        known: the ids whose edges were read already, with those edges (recall reads
            its first candidates' edges beside their records; a statement saved).

    Returns:
        The items, marked and reordered.
    """
    ids = [int(i.id) for i in items if i.type == "memory"]
    if not ids:
        return tuple(items)
    if known is not None and known[0].issuperset(ids):
        listed = set(ids)
        edges = [e for e in known[1] if e.type == EDGE and (e.src in listed or e.dst in listed)]
    else:
        edges = store.edges_of(ids, [EDGE])
    if not edges:
        return tuple(items)
    updates: dict[int, list[int]] = {}
    updated_by: dict[int, list[int]] = {}
    for e in edges:
        updates.setdefault(e.src, []).append(e.dst)
        updated_by.setdefault(e.dst, []).append(e.src)
    marked = [dataclasses.replace(i, updates=tuple(sorted(updates.get(int(i.id), ()))),
                                  updated_by=tuple(sorted(updated_by.get(int(i.id), ()))))
              if i.type == "memory" else i for i in items]
    return tuple(newer_first(marked, edges))
