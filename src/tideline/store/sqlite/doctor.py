"""``doctor``: integrity, FTS integrity, foreign keys, row-count parity — and repair.

Only derived data is ever repaired (full-text rows, vectors of rows that lack one,
ANN index files), with one exception: a time that is not a real instant (a row
written before times were range-checked) is made unknown or clamped, its old
value kept in the journal (:mod:`tideline.store.sqlite.bad_times`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tideline.embed.base import Embedder
from tideline.store import fts_query as fts
from tideline.store.rows import (
    MEMORY_COLUMNS,
    TURN_EMBED_SQL,
    embedding_jobs,
    memory_from_row,
    memory_index_text,
    turn_index_text,
)
from tideline.store.sqlite import bad_times
from tideline.store.sqlite.host import SQLiteHost
from tideline.store.sqlite.presence import restore_hint
from tideline.store.turn_embedding import embed_jobs

if TYPE_CHECKING:
    from tideline.store.sqlite.vector_spaces import VectorSpaces

__all__ = ["run"]

_FTS = ("memories_fts", "memories_tri", "turns_fts", "turns_tri")


def run(
    store: SQLiteHost, embedder: Embedder, vectors: VectorSpaces, *, repair: bool,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Check the store and, with ``repair``, rebuild what is derived.

    After a repair every check runs again, so the report shows the store as it is now;
    ``found`` keeps what the first run saw.

    Returns:
        ``{"ok": bool, "problems": [...], "checks": {...}, "repaired": [...]}``, plus
        ``found`` (with ``repair``) and ``restore`` (how to restore from a backup) when
        a problem remains that is not derived data.
    """
    checks = _checks(store)
    found = _problems(checks, embedder)
    repaired: list[str] = []
    if repair:
        if any(p.startswith("times:") for p in found):
            with store.db.write() as c:
                fixed = bad_times.repair(c)
                store.log_event(c, "doctor_times", fixed)
            repaired.append(f"times:{fixed['rows']}")
        tables = _fts_to_rebuild(found)
        if tables:
            repaired.extend(_rebuild_fts(store, tables))
        embedder_check: dict[str, Any] = {}
        filled = _fill_pending(store, embedder, progress, embedder_check)
        if filled is not None:
            repaired.append(filled)
        if any(p.startswith("parity:vectors") for p in found) and not embedder_check:
            n = _embed_missing(store, embedder, progress)
            repaired.append(f"vectors:{n}")
        sizes = vectors.rebuild_all()
        repaired.append(f"ann:{sum(sizes.values())}")
        checks = _checks(store) | embedder_check
    problems = _problems(checks, embedder)
    if repair and repaired:
        store.log_event(None, "doctor", {"found": found, "repaired": repaired,
                                         "problems": problems})
    out: dict[str, Any] = {"ok": not problems, "problems": problems, "checks": checks,
                           "repaired": repaired}
    if repair:
        out["found"] = found
    if any(p == "integrity" or p == "foreign_keys" or p.startswith("fts:") for p in problems):
        out["restore"] = restore_hint(store.db.directory, store.db.path.name)
    return out


def _checks(store: SQLiteHost) -> dict[str, Any]:
    checks: dict[str, Any] = {}
    with store.db.read() as c:
        try:
            checks["integrity"] = [r[0] for r in c.execute("PRAGMA integrity_check")]
        except sqlite3.DatabaseError as exc:
            checks["integrity"] = [f"integrity_check failed: {exc}"]
        try:
            checks["foreign_keys"] = len(c.execute("PRAGMA foreign_key_check").fetchall())
        except sqlite3.DatabaseError:
            checks["foreign_keys"] = -1
        fts_ok: dict[str, bool] = {}
        for table in _FTS:
            try:
                c.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
                fts_ok[table] = True
            except sqlite3.DatabaseError:
                fts_ok[table] = False
        checks["fts_integrity"] = fts_ok
        checks["parity"] = _parity(c)
        checks["times"] = bad_times.count(c)
    return checks


def _fts_to_rebuild(problems: list[str]) -> list[str]:
    """Full-text tables to rebuild: damaged, out of step, or anywhere when the file is."""
    if "integrity" in problems:  # the damaged pages may be FTS pages: derived, so rebuild
        return list(_FTS)
    named = {p.split(":", 1)[1] for p in problems if p.startswith(("fts:", "parity:"))}
    return [t for t in _FTS if t in named]


def _fill_pending(
    store: SQLiteHost, embedder: Embedder, progress: Callable[[int, int], None] | None,
    checks: dict[str, Any],
) -> str | None:
    """Repair step: embed rows stored while the embedder was down (none for ``none``).

    An embedder that still fails is reported under ``checks["embedder"]`` and leaves
    the rows pending (they stay findable by full text); doctor itself never fails on it.
    """
    from tideline.embed.guard import EmbedGuard
    from tideline.store import pending

    if embedder.name == "none":
        return None
    guard = EmbedGuard(embedder, cooldown_s=0.0)
    result = pending.fill(store, guard.passages, progress=progress)
    if guard.error is not None:
        checks["embedder"] = {"error": guard.error, "pending_left": result["left"]}
    return f"pending_vectors:{result['filled']}"


def _parity(c: sqlite3.Connection) -> dict[str, int]:
    def one(sql: str) -> int:
        try:
            return int(c.execute(sql).fetchone()[0])
        except sqlite3.DatabaseError:  # an unreadable table counts as out of step
            return -1

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


def _problems(checks: dict[str, Any], embedder: Embedder) -> list[str]:
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
    full_text_only = embedder.name == "none"  # such a store keeps no vectors by design
    if not full_text_only and (p["memory_vectors"] != p["memories"]
                               or p["turn_vectors"] != p["turns"]):
        out.append("parity:vectors")
    if p["orphan_vectors"]:
        out.append("parity:vectors_orphans")
    out.extend(f"times:{col}" for col, n in checks.get("times", {}).items() if n)
    return out


def _rebuild_fts(store: SQLiteHost, tables: list[str]) -> list[str]:
    """Rebuild full-text tables from the rows, one transaction each; returns what was done.

    A damaged FTS5 index makes deleting its rows fail, so FTS5's own ``rebuild`` (which
    recreates the index from the table's content) runs first; when even that fails the
    table is dropped and created again. Then its content is refilled from the rows.
    """
    from tideline.errors import StoreError
    done: list[str] = []
    for table in tables:
        try:
            with store.db.write() as c:
                try:
                    c.execute(f"INSERT INTO {table}({table}) VALUES ('rebuild')")
                except sqlite3.DatabaseError:
                    sql = c.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                                    (table,)).fetchone()[0]
                    c.execute(f"DROP TABLE {table}")
                    c.execute(sql)
                c.execute(f"DELETE FROM {table}")
                if table.startswith("memories"):
                    for row in c.execute(f"SELECT {MEMORY_COLUMNS} FROM memories").fetchall():
                        rec = memory_from_row(row)
                        body = memory_index_text(rec)
                        c.execute(f"INSERT INTO {table}(rowid, body) VALUES (?, ?)",
                                  (rec.id, fts.index_text(body) if table.endswith("_fts")
                                   else body))
                else:
                    for tid, speaker, text in c.execute(
                            "SELECT id, speaker, text FROM turns").fetchall():
                        body = turn_index_text(speaker, text)
                        c.execute(f"INSERT INTO {table}(rowid, body) VALUES (?, ?)",
                                  (tid, fts.index_text(body) if table.endswith("_fts")
                                   else body))
            done.append(f"fts:{table}")
        except StoreError as exc:
            done.append(f"fts:{table}:failed ({exc})")
    return done


def _embed_missing(
    store: SQLiteHost, embedder: Embedder, progress: Callable[[int, int], None] | None
) -> int:
    """Drop orphan vectors and embed rows that have none; returns how many were embedded."""
    with store.db.write() as c:
        orphans = c.execute(
            "SELECT space, key FROM vectors v WHERE (v.space LIKE 'm:%' AND v.key NOT IN "
            "(SELECT id FROM memories)) OR (v.space LIKE 't:%' AND v.key NOT IN "
            "(SELECT id FROM turns))").fetchall()
        for space, key in orphans:
            store._drop_vector(c, space, key)
    with store.db.read() as c:
        mem_rows = c.execute(
            f"SELECT {MEMORY_COLUMNS}, namespace FROM memories m WHERE NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.key = m.id AND v.space = 'm:' || m.namespace "
            "|| ':' || m.scope)").fetchall()
        turn_rows = c.execute(
            TURN_EMBED_SQL + " WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.key = t.id "
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
