"""Revision: a new version supersedes the old one, and the history is kept."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from tideline.errors import Conflict, InvalidInput
from tideline.models import WriteResult

if TYPE_CHECKING:
    from tideline.runtime import Runtime

__all__ = ["revise_memory"]

_EDITABLE = {
    "context", "cognition_direction", "kind", "tags", "entities_role", "related_entities",
    "source_links", "importance", "emotional", "recurrence", "unresolved", "event_time",
}


def revise_memory(rt: Runtime, memory_id: int, text: str | None,
                  fields: dict[str, Any], *, scope: str | None = None) -> WriteResult:
    """Write a new version of ``memory_id`` and mark the old one superseded.

    Args:
        rt: the memory's parts (store, write-path input, embedder guard).
        memory_id: the memory to revise.
        text: the new gesture (None: unchanged).
        fields: other fields to change.
        scope: the project acting (None: the current one); another project's memory
            is not found.

    Raises:
        NotFound: no such memory in the project or ``global``.
        Conflict: the memory was already superseded (revise its newest version).
        InvalidInput: an unknown or invalid field.
    """
    unknown = set(fields) - _EDITABLE
    if unknown:
        raise InvalidInput(f"cannot revise field(s): {', '.join(sorted(unknown))}")
    old = rt.get(memory_id, scope=scope)
    if old.status == "superseded":
        raise Conflict(f"memory {memory_id} is already superseded; revise its newest version")
    values: dict[str, Any] = {
        "gesture": old.gesture if text is None else text,
        "context": old.context, "cognition_direction": old.cognition_direction,
        "kind": old.kind, "scope": old.scope, "tags": old.tags,
        "entities_role": old.entities_role, "related_entities": old.related_entities,
        "source_links": old.source_links, "importance": old.importance,
        "emotional": old.emotional, "recurrence": old.recurrence, "unresolved": old.unresolved,
        "event_time": old.event_time,
    }
    values.update(fields)
    draft = rt.draft(**values)
    draft = dataclasses.replace(draft, supersedes=old.id, version=old.version + 1,
                                reinforcements=old.reinforcements, stability=old.stability)
    embedded = rt.guard.passages([draft.text])  # None: stored, vector pending
    vector = None if embedded is None else embedded[0]
    now = time.time()
    store = rt.store
    with store.transaction() as c:
        current = store.get_memory(memory_id, c)
        if current.version != old.version or current.status == "superseded":
            raise Conflict(f"memory {memory_id} changed meanwhile; read it again and retry")
        fresh = dataclasses.replace(draft, recorded_at=now, updated_at=now, last_access=now)
        new_id = store.insert_memory(c, fresh, vector)
        store.set_status(c, memory_id, "superseded", now)
        store.add_edge(c, new_id, memory_id, "supersedes", 1.0, now)
        store.copy_edges(c, memory_id, new_id, ("related", "co_recall", "contradicts"), now)
        store.log_event(c, "revise", {"old": memory_id, "new": new_id}, memory_id=new_id, now=now)
    return WriteResult(id=new_id, decision="new", nearest=memory_id, scope=fresh.scope,
                       vector_pending=vector is None and not rt.guard.full_text_only)
