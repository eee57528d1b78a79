"""The journal as one project may read it: its own events, and the store's without words.

The journal (``events``) is one table per namespace. Reading it whole as project A
showed project B's writes, recalls and forgets, and sleep's metrics carry the topic
labels of every project's clusters (``attention.top[].label`` built from B's keywords):
104–115 leaking reads per probe run of issue 33 item 3.

Every event belongs either to one scope or to the whole namespace:

* its data names a ``scope`` (writes, recalls, forgets, reflects, revisions, dream
  results) or a hook's ``project``; otherwise its ``memory_id`` is that memory's scope
  (an event of a memory that is gone, with no scope of its own, is no one's to read);
* everything else (sleep, doctor, re-embedding, the embedder's state, profiles) is the
  namespace's; of these, the embedder's state and re-embedding (:data:`SYSTEM_KINDS`)
  are about the machinery alone and are shown whole to every reader.

A reader sees the events of the scopes it may see. An event of the namespace is shown
whole only to a reader that may see every scope the namespace holds; to any other its
data is cut to the aggregate: numbers, flags and the names of the metrics, never a text
(a label, a keyword, a path, an entity), a list (memory or cluster ids, the top
clusters) or an id. The counts stay: they say how much sleep did, not what about.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tideline.runtime import Runtime

__all__ = ["aggregate", "event_scope", "visible_events"]

#: A metric name (``pairs_within``, ``ms``): what an aggregate keeps of a mapping's keys.
_METRIC = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
#: Texts of the system itself that an aggregate keeps: when, and in which mode.
_SYSTEM_TEXTS = frozenset({"at", "mode", "embedder", "only", "state"})
#: Numbers that are ids of rows: a reader that cannot see their scope must not learn them.
_ID_KEYS = frozenset({"id", "ids", "memory_id", "memory_ids", "nearest", "old", "new",
                      "seed", "target", "turn_id", "turn_ids"})
#: Kinds of namespace events about the machinery alone (the embedder's state and its
#: error, a re-embedding's markers and counts): no project's words, shown whole.
SYSTEM_KINDS = frozenset({"embedder", "reembed"})
#: How many journal rows one read looks through at most for a reader's events: a
#: project's events older than the namespace's newest 20,000 are not shown (a bound on
#: the cost of a read in a store that other projects fill: ~1 s on a loaded 2-core box).
SCAN_CAP = 20_000


def event_scope(event: dict[str, Any], scopes_of: dict[int, str]) -> str | None:
    """The scope an event belongs to, ``""`` for no one (its memory is gone), or None
    for the namespace as a whole.

    Args:
        event: a journal row as :meth:`tideline.store.base.Store.events` returns it.
        scopes_of: the scope of each memory the events name (ids that are gone are absent).
    """
    data = event.get("data")
    if isinstance(data, dict):
        scope = data.get("scope")
        if isinstance(scope, str) and scope:
            return scope
        if "project" in data:
            project = data.get("project")
            return project if isinstance(project, str) and project else "global"
    mid = event.get("memory_id")
    if mid is not None:
        return scopes_of.get(int(mid), "")
    return None


def aggregate(data: Any, key: str = "") -> Any:
    """The aggregate of an event's data: numbers and flags under metric names (see the
    module's docstring); None when nothing of ``data`` may be shown."""
    if isinstance(data, dict):
        out = {}
        for k, v in data.items():
            if not isinstance(k, str) or not _METRIC.match(k) or k in _ID_KEYS:
                continue
            kept = aggregate(v, k)
            if kept is not None:
                out[k] = kept
        return out
    if isinstance(data, bool | int | float):
        return data
    if isinstance(data, str) and key in _SYSTEM_TEXTS and len(data) <= 40 and (
            _METRIC.match(data) or key == "at"):
        return data
    return None


def visible_events(rt: Runtime, *, kinds: Sequence[str] | None, limit: int,
                   scope: str | None = None) -> list[dict[str, Any]]:
    """The journal as the reader of ``scope`` (default: the current project) may see it,
    newest first, at most ``limit`` events.

    Raises:
        InvalidInput: a malformed scope.
    """
    visible = set(rt.visible(scope))
    store = rt.store
    whole = set(store.scopes()) <= visible
    out: list[dict[str, Any]] = []
    before: int | None = None
    scanned = 0
    # Pages grow fourfold: the reader's newest events are usually near the top, and a
    # reader with few events among many of others' costs a handful of reads, not one
    # per page (each read of the journal sorts the namespace's rows).
    page = max(2 * limit, 500)
    while len(out) < limit and scanned < SCAN_CAP:
        page = min(page, SCAN_CAP - scanned)
        rows = store.events(kinds=kinds, limit=page, before=before)
        if not rows:
            break
        scanned += len(rows)
        before = int(rows[-1]["id"])
        named = {int(e["memory_id"]) for e in rows if e.get("memory_id") is not None}
        scopes_of = {mid: rec.scope for mid, rec in store.get_memories(named).items()}
        for event in rows:
            where = event_scope(event, scopes_of)
            if where is None:
                if not whole and event.get("kind") not in SYSTEM_KINDS:
                    event = event | {"memory_id": None, "data": aggregate(event["data"]) or {}}
            elif where not in visible:
                continue
            out.append(event)
            if len(out) >= limit:
                break
        if len(rows) < page:
            break
        page *= 4
    return out
