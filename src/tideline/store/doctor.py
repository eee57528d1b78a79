"""``doctor``: integrity, FTS integrity, foreign keys, row-count parity — and repair.

Only derived data is ever repaired (full-text rows, vectors of rows that lack one,
ANN index files); rows themselves are never touched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tideline.embed.base import Embedder
from tideline.store import lexical
from tideline.store.sqlite import (
    TURN_EMBED_SQL,
    SQLiteStore,
    embed_jobs,
    embedding_jobs,
    memory_from_row,
    memory_index_text,
    turn_index_text,
)

if TYPE_CHECKING:
    from tideline.recall.vectors import VectorSpaces

__all__ = ["run"]

_FTS = ("memories_fts", "memories_tri", "turns_fts", "turns_tri")


def run(
    store: SQLiteStore, embedder: Embedder, vectors: VectorSpaces, *, repair: bool,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Check the store and, with ``repair``, rebuild what is derived.

    Returns:
        ``{"ok": bool, "checks": {...}, "repaired": [...]}``.
    """
    checks: dict[str, Any] = {}
    repaired: list[str] = []
    with store.db.read() as c:
        checks["integrity"] = [r[0] for r in c.execute("PRAGMA integrity_check").fetchall()]
        checks["foreign_keys"] = len(c.execute("PRAGMA foreign_key_check").fetchall())
        fts_ok: dict[str, bool] = {}
        for table in _FTS:
            try:
                c.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")  # noqa: S608
                fts_ok[table] = True
            except sqlite3.DatabaseError:
                fts_ok[table] = False
        checks["fts_integrity"] = fts_ok
        checks["parity"] = _parity(c)
    problems = _problems(checks)
    if repair and problems:
        if any(p.startswith(("fts", "parity:memories_", "parity:turns_")) for p in problems):
            _rebuild_fts(store)
            repaired.append("fts")
        if any(p.startswith("parity:vectors") for p in problems):
            n = _embed_missing(store, embedder, progress)
            repaired.append(f"vectors:{n}")
    if repair:
        sizes = vectors.rebuild_all()
        repaired.append(f"ann:{sum(sizes.values())}")
        with store.db.read() as c:
            checks["parity"] = _parity(c)
        problems = _problems(checks)
    if repair and repaired:
        store.log_event(None, "doctor", {"repaired": repaired, "problems": problems})
    return {"ok": not problems, "problems": problems, "checks": checks, "repaired": repaired}


def _parity(c: sqlite3.Connection) -> dict[str, int]:
    def one(sql: str) -> int:
        return int(c.execute(sql).fetchone()[0])

    return {
        "memories": one("SELECT count(*) FROM memories"),
        "memories_fts": one("SELECT count(*) FROM memories_fts"),
        "memories_tri": one("SELECT count(*) FROM memories_tri"),
        "memory_vectors": one("SELECT count(*) FROM vectors WHERE space LIKE 'm:%'"),
        "turns": one("SELECT count(*) FROM turns"),
        "turns_fts": one("SELECT count(*) FROM turns_fts"),
        "turns_tri": one("SELECT count(*) FROM turns_tri"),
        "turn_vectors": one("SELECT count(*) FROM vectors WHERE space LIKE 't:%'"),
        "orphan_vectors": one(
            "SELECT count(*) FROM vectors v WHERE (v.space LIKE 'm:%' AND v.key NOT IN "
            "(SELECT id FROM memories)) OR (v.space LIKE 't:%' AND v.key NOT IN "
            "(SELECT id FROM turns))"),
    }


def _problems(checks: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if checks["integrity"] != ["ok"]:
        out.append("integrity")
    if checks["foreign_keys"]:
        out.append("foreign_keys")
    out.extend(f"fts:{t}" for t, ok in checks["fts_integrity"].items() if not ok)
    p = checks["parity"]
    out.extend(f"parity:{t}" for t in ("memories_fts", "memories_tri")
               if p[t] != p["memories"])
    out.extend(f"parity:{t}" for t in ("turns_fts", "turns_tri") if p[t] != p["turns"])
    if p["memory_vectors"] != p["memories"] or p["turn_vectors"] != p["turns"]:
        out.append("parity:vectors")
    if p["orphan_vectors"]:
        out.append("parity:vectors_orphans")
    return out


def _rebuild_fts(store: SQLiteStore) -> None:
    from tideline.store.sqlite import _MEMORY_COLUMNS

    with store.db.write() as c:
        for table in _FTS:
            c.execute(f"DELETE FROM {table}")  # noqa: S608
        for row in c.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories").fetchall():  # noqa: S608
            rec = memory_from_row(row)
            body = memory_index_text(rec)
            c.execute("INSERT INTO memories_fts(rowid, body) VALUES (?, ?)",
                      (rec.id, lexical.index_text(body)))
            c.execute("INSERT INTO memories_tri(rowid, body) VALUES (?, ?)", (rec.id, body))
        for tid, speaker, text in c.execute("SELECT id, speaker, text FROM turns").fetchall():
            body = turn_index_text(speaker, text)
            c.execute("INSERT INTO turns_fts(rowid, body) VALUES (?, ?)",
                      (tid, lexical.index_text(body)))
            c.execute("INSERT INTO turns_tri(rowid, body) VALUES (?, ?)", (tid, body))


def _embed_missing(
    store: SQLiteStore, embedder: Embedder, progress: Callable[[int, int], None] | None
) -> int:
    """Drop orphan vectors and embed rows that have none; returns how many were embedded."""
    from tideline.store.sqlite import _MEMORY_COLUMNS

    with store.db.write() as c:
        orphans = c.execute(
            "SELECT space, key FROM vectors v WHERE (v.space LIKE 'm:%' AND v.key NOT IN "
            "(SELECT id FROM memories)) OR (v.space LIKE 't:%' AND v.key NOT IN "
            "(SELECT id FROM turns))").fetchall()
        for space, key in orphans:
            store._drop_vector(c, space, key)
    with store.db.read() as c:
        mem_rows = c.execute(
            f"SELECT {_MEMORY_COLUMNS}, namespace FROM memories m WHERE NOT EXISTS "  # noqa: S608
            "(SELECT 1 FROM vectors v WHERE v.key = m.id AND v.space = 'm:' || m.namespace "
            "|| ':' || m.scope)").fetchall()
        turn_rows = c.execute(
            TURN_EMBED_SQL + " WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.key = t.id "  # noqa: S608
            "AND v.space = 't:' || t.namespace || ':' || t.scope)").fetchall()
    jobs = embedding_jobs(mem_rows, turn_rows)
    for start in range(0, len(jobs), 64):
        chunk = jobs[start:start + 64]
        vecs = embed_jobs(embedder, chunk)
        with store.db.write() as c:
            for (space, key, _, _), v in zip(chunk, vecs, strict=True):
                store._put_vector(c, space, key, v)
        if progress:
            progress(min(start + 64, len(jobs)), len(jobs))
    return len(jobs)
