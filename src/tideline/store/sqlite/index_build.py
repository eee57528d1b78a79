"""Build the local vector indexes at the end of a bulk import, not at the first recall.

A store on SQLite keeps one ANN index file per vector space next to the database
(:mod:`tideline.store.sqlite.vector_index`). An import that adds many vectors used to leave
that file behind the change log, and the first recall in a new process rebuilt the
index (30.9 s at 100k memories, issue 33 item 13). Bringing every space up to date
right after the import, and saving it, moves that cost into the import, which is
already a long operation the user waits for; an index that a saved file covers is only
caught up (incrementally) instead. PostgreSQL keeps its index in the database: nothing
to do there.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_after_import"]


def build_after_import(vectors: Any) -> dict[str, int]:
    """Sync and save every space's local index; returns vectors per space ({} on a server).

    Args:
        vectors: the runtime's vector spaces.

    Returns:
        ``{space: vectors}`` of the indexes brought up to date.
    """
    from tideline.store.sqlite.vector_spaces import VectorSpaces

    if not isinstance(vectors, VectorSpaces):
        return {}
    return vectors.build_all()
