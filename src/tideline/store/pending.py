"""Vectors pending: rows stored while the embedder was unavailable get their vector later.

A memory or turn written while the embedder failed is stored whole, full-text
indexed, and without a vector; ``db_meta.vectors_pending`` is set in the same
transaction (:func:`tideline.store.rows.mark_pending`). :func:`fill` embeds what
lacks a vector once the embedder answers — after the next successful write, in
sleep, and in ``doctor --repair`` — and clears the flag when nothing is left, so
the common path (no flag) costs one ``db_meta`` read. Nothing is lost meanwhile:
the row is there, found by full text and the graph.

Portable SQL over :class:`PendingHost`: both backends' stores fill through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from tideline.embed.base import Vectors
from tideline.store.database import Connection, Database
from tideline.store.rows import MEMORY_COLUMNS, PENDING_FLAG, TURN_EMBED_SQL, embedding_jobs

__all__ = ["PendingHost", "count", "fill", "flagged"]

FLAG = PENDING_FLAG
BATCH = 64

_MEMORIES_WITHOUT = (
    f"SELECT {MEMORY_COLUMNS}, namespace FROM memories m WHERE NOT EXISTS "
    "(SELECT 1 FROM vectors v WHERE v.key = m.id AND v.space = 'm:' || m.namespace "
    "|| ':' || m.scope)")
_TURNS_WITHOUT = (
    TURN_EMBED_SQL + " WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.key = t.id "
    "AND v.space = 't:' || t.namespace || ':' || t.scope)")


class PendingHost(Protocol):
    """What filling pending vectors needs of a store (each backend's store is one)."""

    @property
    def db(self) -> Database:
        """The database object."""

    def _put_vector(self, c: Any, space: str, key: int, vector: np.ndarray) -> None:
        """Store one row's vector inside the write transaction ``c``."""


def flagged(store: PendingHost) -> bool:
    """Whether some row may lack its vector (one ``db_meta`` read)."""
    return store.db.get_meta(FLAG) == "1"


def count(c: Connection) -> int:
    """How many memories and turns lack a vector (a scan: doctor and reports only)."""
    return sum(int(c.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0])
               for sql in (_MEMORIES_WITHOUT, _TURNS_WITHOUT))


def fill(
    store: PendingHost, embed: Callable[[Sequence[str]], Vectors | None], *,
    limit: int | None = None, progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Embed rows that lack a vector, in batches, each stored in its own transaction.

    Args:
        store: the store.
        embed: embeds passages, or returns None when the embedder is unavailable
            (:meth:`tideline.embed.EmbedGuard.passages`); filling then stops.
        limit: embed at most this many rows now (None: all).
        progress: called with (done, total).

    Returns:
        ``{"filled": n, "left": m}``; ``left`` is 0 and the flag cleared when done.
    """
    with store.db.read() as c:
        jobs = embedding_jobs(c.execute(_MEMORIES_WITHOUT).fetchall(),
                              c.execute(_TURNS_WITHOUT).fetchall())
    todo = jobs if limit is None else jobs[:limit]
    filled = 0
    for start in range(0, len(todo), BATCH):
        chunk = todo[start:start + BATCH]
        vectors = _vectors(embed, chunk)
        if vectors is None:
            break
        with store.db.write() as c:
            for (space, key, _, _), vector in zip(chunk, vectors, strict=True):
                table = "memories" if space.startswith("m:") else "turns"
                # The row may have been forgotten (or re-embedded) since the read.
                alive = c.execute(f"SELECT 1 FROM {table} WHERE id = ?", (key,)).fetchone()
                present = c.execute("SELECT 1 FROM vectors WHERE space = ? AND key = ?",
                                    (space, key)).fetchone()
                if alive and not present:
                    store._put_vector(c, space, key, vector)
                    filled += 1
        if progress is not None:
            progress(min(start + BATCH, len(todo)), len(todo))
    left = len(jobs) - filled
    if left <= 0:
        with store.db.write() as c:
            # Re-checked under the write lock: a degraded write may have landed meanwhile.
            if not c.execute(f"SELECT 1 FROM ({_MEMORIES_WITHOUT}) LIMIT 1").fetchone() and \
                    not c.execute(f"SELECT 1 FROM ({_TURNS_WITHOUT}) LIMIT 1").fetchone():
                c.execute("DELETE FROM db_meta WHERE key = ?", (FLAG,))
        left = 0
    return {"filled": filled, "left": left}


def _vectors(
    embed: Callable[[Sequence[str]], Vectors | None],
    chunk: Sequence[tuple[str, int, str, str | None]],
) -> list[Any] | None:
    """Vectors for a chunk of jobs, turns built as an import builds them; None when the
    embedder is still unavailable."""
    from tideline.store.turn_embedding import embed_turns

    out: list[Any] = [None] * len(chunk)
    mems = [i for i, j in enumerate(chunk) if j[0].startswith("m:")]
    turns = [i for i, j in enumerate(chunk) if not j[0].startswith("m:")]
    if mems:
        got = embed([chunk[i][2] for i in mems])
        if got is None:
            return None
        for i, v in zip(mems, got, strict=True):
            out[i] = v
    if turns:
        lean = embed_turns(None, [chunk[i][2] for i in turns], [chunk[i][3] for i in turns],
                           passages=embed)
        if lean is None:
            return None
        for i, v in zip(turns, lean, strict=True):
            out[i] = v
    return out
