"""Forgetting for real (privacy): a memory's row, index rows and edges go, journaled.

:func:`forget` answers ``Memory.forget``. The scope check and the delete share one
write transaction, so a memory another project cannot see is never deleted on its
behalf, and the ``forget`` event names the scope and kind but never the text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tideline.errors import NotFound
from tideline.write.validate import clean_id

if TYPE_CHECKING:
    from tideline.runtime import Runtime

__all__ = ["forget"]


def forget(rt: Runtime, memory_id: int, *, scope: str | None = None) -> dict[str, Any]:
    """Delete one memory the project may see (see :meth:`tideline.Memory.forget`).

    Returns:
        ``{"forgotten": id, "scope": the memory's scope}``.

    Raises:
        InvalidInput: not a positive integer id.
        NotFound: no such memory in the project or ``global``.
    """
    mid = clean_id(memory_id, "memory_id")
    visible = rt.visible(scope)
    store = rt.store
    with store.transaction() as c:
        if store.get_memory(mid, c).scope not in visible:
            raise NotFound(f"no memory with id {mid}")
        rec = store.delete_memory(c, mid)
        store.log_event(c, "forget", {"scope": rec.scope, "kind": rec.kind}, memory_id=mid)
    return {"forgotten": mid, "scope": rec.scope}
