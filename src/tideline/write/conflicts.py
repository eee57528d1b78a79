"""Corrections and conflicts: pairs of memories a person resolves side by side.

A pair is an edge of kind ``updates`` (the write gate's correction of an older memory)
or ``contradicts`` (DREAM's comb) whose two ends are both live. :func:`conflicts`
lists them a page at a time; :func:`resolve_conflict` settles one in a single write
transaction that re-checks both ends:

* ``keep_both``: both stay true; the conflict edge becomes a ``related`` one.
* ``supersede``: the kept memory supersedes the other exactly as DREAM's apply does
  (status ``superseded`` and a ``supersedes`` edge from the kept one); the conflict
  edge stays, as history.

Each resolution is journaled as ``conflict_resolved``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tideline.errors import Conflict, InvalidInput, NotFound
from tideline.store.browse import CONFLICT_EDGES, BrowseStore
from tideline.write.validate import clean_id

if TYPE_CHECKING:
    from tideline.runtime import Runtime

__all__ = ["ACTIONS", "conflicts", "resolve_conflict"]

ACTIONS = ("keep_both", "supersede")


def conflicts(rt: Runtime, *, scopes: list[str] | None, limit: int = 50,
              before: tuple[float, int, int] | None = None) -> list[dict[str, Any]]:
    """Open pairs newest first, both memories visible in ``scopes`` (None: every scope).

    Returns:
        ``[{"src", "dst", "type", "weight", "created_at", "a": MemoryRecord,
        "b": MemoryRecord}, …]`` (``a`` the edge's source: the newer or correcting one).
    """
    view = BrowseStore(rt.store)
    out: list[dict[str, Any]] = []
    cursor = before
    # Pairs of other scopes are skipped here; a few pages at most are read for one page.
    for _ in range(5):
        edges = view.conflict_edges(before=cursor, limit=limit)
        if not edges:
            break
        recs = rt.store.get_memories({e["src"] for e in edges} | {e["dst"] for e in edges})
        for e in edges:
            a, b = recs.get(e["src"]), recs.get(e["dst"])
            if a is None or b is None:
                continue
            if scopes is not None and (a.scope not in scopes or b.scope not in scopes):
                continue
            out.append({**e, "a": a, "b": b})
        last = edges[-1]
        cursor = (last["created_at"], last["src"], last["dst"])
        if len(out) >= limit or len(edges) < limit:
            break
    return out[:limit]


def resolve_conflict(rt: Runtime, src: int, dst: int, action: str, *,
                     keep: int | None = None, scope: str | None = None,
                     all_scopes: bool = False) -> dict[str, Any]:
    """Settle one pair (see the module docstring).

    Args:
        rt: the memory's parts.
        src: the edge's source memory.
        dst: the edge's target memory.
        action: ``keep_both`` or ``supersede``.
        keep: with ``supersede``, the memory that stays (``src`` or ``dst``; default ``src``,
            the newer or correcting one).
        scope: the project acting (default: the current one); both memories must be
            visible to it.
        all_scopes: act for every project of the namespace (an explicit choice).

    Returns:
        ``{"action", "kept", "superseded", "pair": [src, dst], "type"}``.

    Raises:
        InvalidInput: bad ids, unknown action, ``keep`` not one of the pair.
        NotFound: no such open pair visible to the scope.
        Conflict: one of the two was superseded meanwhile.
    """
    a_id, b_id = clean_id(src, "src"), clean_id(dst, "dst")
    if action not in ACTIONS:
        raise InvalidInput(f"action must be one of {', '.join(ACTIONS)}")
    kept = a_id if keep is None else clean_id(keep, "keep")
    if kept not in (a_id, b_id):
        raise InvalidInput("keep must be one of the pair")
    visible = None if all_scopes else rt.visible(scope)
    store = rt.store
    view = BrowseStore(store)
    now = time.time()
    with store.transaction() as c:
        kinds = [k for k in CONFLICT_EDGES if view.has_edge_in(c, a_id, b_id, k)]
        found = store.get_memories([a_id, b_id], c)
        if not kinds or len(found) < 2 or (visible is not None and any(
                r.scope not in visible for r in found.values())):
            raise NotFound(f"no open conflict between #{a_id} and #{b_id}")
        if any(r.status == "superseded" for r in found.values()):
            raise Conflict(f"#{a_id} or #{b_id} was superseded meanwhile")
        result: dict[str, Any] = {"action": action, "pair": [a_id, b_id], "type": kinds[0],
                                  "kept": [a_id, b_id], "superseded": None}
        if action == "keep_both":
            for kind in kinds:
                view.drop_edge_in(c, a_id, b_id, kind)
            store.add_edge(c, a_id, b_id, "related", 0.5, now)
        else:
            older = b_id if kept == a_id else a_id
            store.set_status(c, older, "superseded", now)
            store.add_edge(c, kept, older, "supersedes", 1.0, now)
            result.update(kept=[kept], superseded=older)
        store.log_event(c, "conflict_resolved", {
            "action": action, "type": kinds[0], "pair": [a_id, b_id],
            "superseded": result["superseded"]}, memory_id=kept)
    return result
