"""Reads for people and tools beyond a record: a memory shown whole, the journal, the store.

The facade's ``show``, ``events`` and ``introspect`` answer from here; the plain reads
by id (a memory, raw turns) are the runtime's own (:meth:`tideline.runtime.Runtime.get`,
:meth:`~tideline.runtime.Runtime.turns`). Every read answers only from the scopes the
project may see: history versions, edges and linked turns of another project are
left out, as if they did not exist.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tideline.dynamics import retention
from tideline.write.validate import clean_int, clean_list

if TYPE_CHECKING:
    from tideline.project import ProjectInfo
    from tideline.runtime import Runtime

__all__ = ["events", "introspect", "show"]

#: How many older versions ``show`` walks back through ``supersedes``.
HISTORY_DEPTH = 50


def show(rt: Runtime, memory_id: int, *, scope: str | None = None) -> dict[str, Any]:
    """A memory with its edges, version history, retention and linked raw turns.

    Raises:
        InvalidInput: not a positive integer id, or a malformed scope.
        NotFound: no such memory in the project or ``global``.
    """
    visible = rt.visible(scope)
    rec = rt.get(memory_id, scope=scope)
    store = rt.store
    history: list[dict[str, Any]] = []
    cursor = rec.supersedes
    while cursor is not None and len(history) < HISTORY_DEPTH:
        found = store.get_memories([cursor])
        if cursor not in found or found[cursor].scope not in visible:
            break
        history.append(found[cursor].to_dict())
        cursor = found[cursor].supersedes
    edges = store.edges_of([rec.id])
    others = store.get_memories({e.src for e in edges} | {e.dst for e in edges})
    seen = {mid for mid, r in others.items() if r.scope in visible}
    out = rec.to_dict()
    out["retention"] = round(retention(rec, time.time(), rt.config.dynamics), 4)
    out["edges"] = [e.to_dict() for e in edges if e.src in seen and e.dst in seen]
    # A correction the gate kept: what this memory updates, and what updates it.
    out["updates"] = [e.dst for e in edges if e.type == "updates" and e.src == rec.id
                      and e.dst in seen]
    out["updated_by"] = [e.src for e in edges if e.type == "updates" and e.dst == rec.id
                         and e.src in seen]
    out["history"] = history
    out["turns"] = [t.to_dict() for t in rt.turns(rec.source_links, scope=scope)]
    return out


def events(rt: Runtime, *, kinds: Sequence[str] | None = None,
           limit: int = 50, all_scopes: bool = False) -> list[dict[str, Any]]:
    """The journal as the current project may read it, newest first: the events of its
    scopes and ``global``, and the store's own (sleep, doctor) reduced to their counts
    while the namespace holds other projects (:mod:`tideline.journal`).

    Raises:
        InvalidInput: ``limit`` is not an integer 1–10000 or a kind is malformed.
    """
    from tideline.journal import visible_events

    caps = rt.config.caps
    wanted = None if kinds is None else list(clean_list(
        kinds, "kinds", item_cap=caps.name_chars, count_cap=caps.limit))
    limit = clean_int(limit, "limit", lo=1, hi=10_000)
    if all_scopes:
        return rt.store.events(kinds=wanted, limit=limit)
    return visible_events(rt, kinds=wanted, limit=limit)


def introspect(rt: Runtime, project: ProjectInfo, *, all_scopes: bool = False) -> dict[str, Any]:
    """Store statistics, the current project (and how it was chosen) and the embedder.

    The scopes listed, and the counts by scope and by kind, are those the current
    project may see (it and ``global``): another project's name, or a kind only it
    uses, is not its to read. The totals stay the namespace's (numbers, no word), as
    the journal keeps sleep's counts. ``all_scopes``: the operator's whole view.
    """
    store, embedder = rt.store, rt.embedder
    described = store.describe()
    visible = None if all_scopes else rt.visible(None)
    out = store.stats()
    if visible is not None:
        own = store.stats(visible)
        out["by_scope"], out["by_kind"] = own["by_scope"], own["by_kind"]
    out.update({
        "store": str(rt.config.home),
        "database": described["database"],
        "namespace": rt.config.namespace,
        "project": rt.project,
        "project_rule": project.rule,
        "project_detection": project.to_dict(),
        "scopes": [s for s in store.scopes() if visible is None or s in visible],
        "embedder": {"name": embedder.name, "marker": embedder.marker, "dim": embedder.dim,
                     "profile": dataclasses.asdict(embedder.profile)},
        "schema_version": described["schema_version"],
    })
    topology = getattr(store, "topology", None)  # PostgreSQL: primary, standbys, read URL
    if topology is not None:
        out["replication"] = topology()
    return out
