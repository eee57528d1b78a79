"""``reembed``: move a store to another embedder.

New vectors are computed in batches into a staging table (short transactions,
no embedding inside one), then swapped in with the new marker in one
transaction. Until the swap the store keeps working with its old embedder; an
interrupted run leaves only the staging table, which the next run clears.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tideline.embed.base import Embedder
from tideline.store.rows import MEMORY_COLUMNS, TURN_EMBED_SQL, embedding_jobs
from tideline.store.sqlite.host import SQLiteHost
from tideline.store.turn_embedding import embed_jobs

__all__ = ["run"]

BATCH = 64


def run(
    store: SQLiteHost, new: Embedder, *, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """Re-embed every memory and turn of every namespace with ``new`` and switch the marker.

    Returns:
        ``{"memories": n, "turns": n, "from": old_marker, "to": new_marker}``.
    """
    old_marker = store.db.get_meta("embedder")
    with store.db.write() as c:
        c.execute("DROP TABLE IF EXISTS vectors_staging")
        c.execute("CREATE TABLE vectors_staging (space TEXT NOT NULL, key INTEGER NOT NULL, "
                  "v BLOB NOT NULL, PRIMARY KEY (space, key))")
    with store.db.read() as c:
        mems = c.execute(
            f"SELECT {MEMORY_COLUMNS}, namespace FROM memories ORDER BY id"
        ).fetchall()
        turns = c.execute(TURN_EMBED_SQL + " ORDER BY t.id").fetchall()
    jobs = embedding_jobs(mems, turns)
    total = len(jobs)
    for start in range(0, total, BATCH):
        chunk = jobs[start:start + BATCH]
        vecs = embed_jobs(new, chunk)
        with store.db.write() as c:
            c.executemany(
                "INSERT OR REPLACE INTO vectors_staging(space, key, v) VALUES (?,?,?)",
                [(s, k, np.ascontiguousarray(v, dtype=np.float32).tobytes())
                 for (s, k, _, _), v in zip(chunk, vecs, strict=True)],
            )
        if progress:
            progress(min(start + BATCH, total), total)
    with store.db.write() as c:
        c.execute("DELETE FROM vectors")
        c.execute("INSERT INTO vectors(space, key, v) SELECT space, key, v FROM vectors_staging")
        c.execute("INSERT INTO vector_log(space, key, present) "
                  "SELECT space, key, 1 FROM vectors_staging")
        c.execute("DROP TABLE vectors_staging")
        c.execute("UPDATE db_meta SET value = ? WHERE key = 'embedder'", (new.marker,))
        store.log_event(c, "reembed", {"from": old_marker, "to": new.marker,
                                       "memories": len(mems), "turns": len(turns)})
    return {"memories": len(mems), "turns": len(turns), "from": old_marker, "to": new.marker}
