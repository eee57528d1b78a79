"""``doctor`` and ``reembed`` on PostgreSQL.

The server keeps its own pages and constraints whole (foreign keys and CHECKs are
enforced, not advisory), so doctor checks what is derived: the word and substring
index rows of every memory and turn, vectors of every row, orphan vectors, impossible
times; its repair rebuilds index rows, embeds what lacks a vector and rebuilds the
HNSW index. Reembed stages the new vectors in short transactions, then swaps them in
with the new marker in one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tideline.store.postgres.pgvector import vector_text
from tideline.store.postgres.schema import ensure_vector_index
from tideline.store.rows import MEMORY_COLUMNS as _MEMORY_COLUMNS
from tideline.store.rows import TIME_COLUMNS as COLUMNS
from tideline.store.rows import TURN_EMBED_SQL, embedding_jobs, memory_from_row
from tideline.store.turn_embedding import embed_jobs
from tideline.times import MAX_TS, MIN_TS

if TYPE_CHECKING:
    from tideline.embed.base import Embedder
    from tideline.store.postgres.host import PostgresHost
    from tideline.store.postgres.vectors import PostgresVectorSpaces

__all__ = ["doctor", "reembed"]

Progress = Callable[[int, int], None]
_BATCH = 64
_ORPHANS = ("FROM vectors v WHERE (substr(v.space, 1, 2) = 'm:' AND NOT EXISTS "
            "(SELECT 1 FROM memories m WHERE m.id = v.key)) OR (substr(v.space, 1, 2) = 't:' "
            "AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = v.key))")


def _checks(store: PostgresHost) -> dict[str, Any]:
    with store.db.read() as c:
        def one(sql: str) -> int:
            return int(c.execute(sql).fetchone()[0])

        parity = {
            "memories": one("SELECT count(*) FROM memories"),
            "memories_lex": one("SELECT count(*) FROM memories_lex"),
            "memory_vectors": one("SELECT count(*) FROM vectors WHERE substr(space, 1, 2) "
                                  "= 'm:'"),
            "turns": one("SELECT count(*) FROM turns"),
            "turns_lex": one("SELECT count(*) FROM turns_lex"),
            "turn_vectors": one("SELECT count(*) FROM vectors WHERE substr(space, 1, 2) "
                                "= 't:'"),
            "orphan_vectors": one(f"SELECT count(*) {_ORPHANS}"),  # noqa: S608
        }
        times = {f"{table}.{column}": one(
            f"SELECT count(*) FROM {table} WHERE {column} IS NOT NULL AND "  # noqa: S608
            f"({column} = 'NaN'::float8 OR {column} < {MIN_TS!r} OR {column} > {MAX_TS!r})")
            for table, column, _ in COLUMNS}
        version = one("SELECT value::bigint FROM db_meta WHERE key = 'schema_version'")
    return {"integrity": ["ok"], "foreign_keys": 0, "schema_version": version,
            "parity": parity, "times": times}


def _problems(checks: dict[str, Any], embedder: Embedder) -> list[str]:
    p = checks["parity"]
    out = [f"parity:{t}" for t, rows in (("memories_lex", "memories"), ("turns_lex", "turns"))
           if p[t] != p[rows]]
    if embedder.name != "none" and (p["memory_vectors"] != p["memories"]
                                    or p["turn_vectors"] != p["turns"]):
        out.append("parity:vectors")
    if p["orphan_vectors"]:
        out.append("parity:vectors_orphans")
    out.extend(f"times:{col}" for col, n in checks["times"].items() if n)
    return out


def _reindex_rows(store: PostgresHost) -> str:
    """Rebuild every word and substring index row from the rows (of every namespace,
    each row with its own)."""
    n = 0
    with store.db.write() as c:
        c.execute("DELETE FROM memories_lex")
        c.execute("DELETE FROM turns_lex")
        for row in c.execute(f"SELECT namespace, {_MEMORY_COLUMNS} FROM memories"  # noqa: S608
                             ).fetchall():
            rec = memory_from_row(row[1:])
            store._index_memory(c, rec.id, rec, namespace=str(row[0]))
            n += 1
        for tid, ns, speaker, text in c.execute(
                "SELECT id, namespace, speaker, text FROM turns").fetchall():
            store._index_turn(c, int(tid), str(speaker), str(text), namespace=str(ns))
            n += 1
    return f"lexical:{n}"


def _embed_missing(store: PostgresHost, embedder: Embedder, progress: Progress | None) -> int:
    with store.db.write() as c:
        c.execute(f"DELETE {_ORPHANS}")  # noqa: S608
    with store.db.read() as c:
        mem_rows = c.execute(
            f"SELECT {_MEMORY_COLUMNS}, namespace FROM memories m WHERE NOT EXISTS "  # noqa: S608
            "(SELECT 1 FROM vectors v WHERE v.key = m.id AND v.space = 'm:' || m.namespace "
            "|| ':' || m.scope)").fetchall()
        turn_rows = c.execute(
            TURN_EMBED_SQL + " WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.key = t.id "  # noqa: S608
            "AND v.space = 't:' || t.namespace || ':' || t.scope)").fetchall()
    jobs = embedding_jobs(mem_rows, turn_rows)
    for start in range(0, len(jobs), _BATCH):
        chunk = jobs[start:start + _BATCH]
        vecs = embed_jobs(embedder, chunk)
        with store.db.write() as c:
            for (space, key, _, _), v in zip(chunk, vecs, strict=True):
                store._put_vector(c, space, key, v)
        if progress:
            progress(min(start + _BATCH, len(jobs)), len(jobs))
    return len(jobs)


def doctor(store: PostgresHost, embedder: Embedder, vectors: PostgresVectorSpaces, *,
           repair: bool, progress: Progress | None = None) -> dict[str, Any]:
    """Check the derived data of the store and, with ``repair``, rebuild it.

    Returns:
        ``{"ok": bool, "problems": [...], "checks": {...}, "repaired": [...]}`` (and
        ``found`` with ``repair``), as on SQLite.
    """
    checks = _checks(store)
    found = _problems(checks, embedder)
    repaired: list[str] = []
    if repair:
        if any(p.startswith("parity:") and p.endswith("_lex") for p in found):
            repaired.append(_reindex_rows(store))
        if embedder.name != "none" and any(p.startswith("parity:vectors") for p in found):
            repaired.append(f"vectors:{_embed_missing(store, embedder, progress)}")
        if embedder.name != "none":
            from tideline.embed.guard import EmbedGuard
            guard = EmbedGuard(embedder, cooldown_s=0.0)
            filled = store.fill_pending(guard.passages, progress=progress)
            repaired.append(f"pending_vectors:{filled['filled']}")
        sizes = vectors.rebuild_all()
        repaired.append(f"ann:{sum(sizes.values())}")
        checks = _checks(store)
    problems = _problems(checks, embedder)
    if repair and repaired:
        store.log_event(None, "doctor", {"found": found, "repaired": repaired,
                                         "problems": problems})
    out: dict[str, Any] = {"ok": not problems, "problems": problems, "checks": checks,
                           "repaired": repaired, "backend": "postgresql"}
    if repair:
        out["found"] = found
    return out


def reembed(store: PostgresHost, new: Embedder, *,
            progress: Progress | None = None) -> dict[str, Any]:
    """Re-embed every memory and turn of every namespace with ``new`` and switch the marker.

    Returns:
        ``{"memories": n, "turns": n, "from": old_marker, "to": new_marker}``.
    """
    old_marker = store.db.get_meta("embedder")
    with store.db.write() as c:
        c.execute("DROP TABLE IF EXISTS vectors_staging")
        c.execute("CREATE TABLE vectors_staging (space text NOT NULL, key bigint NOT NULL, "
                  "v vector NOT NULL, PRIMARY KEY (space, key))")
    with store.db.read() as c:
        mems = c.execute(
            f"SELECT {_MEMORY_COLUMNS}, namespace FROM memories ORDER BY id"  # noqa: S608
        ).fetchall()
        turns = c.execute(TURN_EMBED_SQL + " ORDER BY t.id").fetchall()
    jobs = embedding_jobs(mems, turns)
    total = len(jobs)
    for start in range(0, total, _BATCH):
        chunk = jobs[start:start + _BATCH]
        vecs = embed_jobs(new, chunk)
        rows = []
        for (s, k, _, _), v in zip(chunk, vecs, strict=True):
            arr = np.ascontiguousarray(v, dtype=np.float32).ravel()
            rows.append((s, k, vector_text(arr)))
        with store.db.write() as c:
            c.executemany(
                "INSERT INTO vectors_staging(space, key, v) VALUES (?, ?, ?::vector) "
                "ON CONFLICT (space, key) DO UPDATE SET v = excluded.v",
                rows)
        if progress:
            progress(min(start + _BATCH, total), total)
    with store.db.write() as c:
        c.execute("DELETE FROM vectors")
        c.execute("INSERT INTO vectors(space, key, v) SELECT space, key, v FROM vectors_staging")
        c.execute("DROP TABLE vectors_staging")
        c.execute("UPDATE db_meta SET value = ? WHERE key = 'embedder'", (new.marker,))
        ensure_vector_index(c, new.dim)
        store.log_event(c, "reembed", {"from": old_marker, "to": new.marker,
                                       "memories": len(mems), "turns": len(turns)})
    return {"memories": len(mems), "turns": len(turns), "from": old_marker, "to": new.marker}
