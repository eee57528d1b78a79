"""The SQLite implementation of the :class:`~tideline.store.Store` protocol.

One file holds everything; the full-text tables and the vector log are kept in
step with the rows inside the same short transaction. Vector index files are
derived from the ``vectors`` table (see :mod:`tideline.recall.vector_index`).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tideline.errors import EmbedderMismatch, NotFound
from tideline.models import Edge, LexicalQuery, MemoryRecord, Turn
from tideline.store.events import append_event
from tideline.store.rows import (
    MEMORY_COLUMNS,
    TURN_COLUMNS,
    json_list,
    mark_pending,
    memory_from_row,
    memory_index_text,
    turn_from_row,
    turn_index_text,
)
from tideline.store.sqlite import fts
from tideline.store.sqlite.connection import Database
from tideline.store.view import placeholders

if TYPE_CHECKING:
    from tideline.embed.base import Embedder, Vectors
    from tideline.recall.vectors import VectorSpaces
    from tideline.store.agent import AgentReader
    from tideline.store.sqlite.dump import SQLiteLoader, SQLiteSnapshot

__all__ = ["SQLiteStore", "SpaceSource"]

# Document frequencies at or above this many rows are cached (see document_frequencies).
_DF_CACHE_MIN = 500
_DF_CACHE_SIZE = 20_000
_DF_CACHE_SECONDS = 60.0

class SpaceSource:
    """The vectors of one space (``m:<ns>:<scope>`` or ``t:<ns>:<scope>``) as a VectorSource."""

    def __init__(self, db: Database, space: str, dim: int) -> None:
        self.db = db
        self.space = space
        self.dim = dim

    def vector_seq(self) -> int:
        """Newest change-log sequence number of this space."""
        with self.db.read() as c:
            row = c.execute(
                "SELECT max(seq) FROM vector_log WHERE space = ?", (self.space,)
            ).fetchone()
        return int(row[0] or 0)

    def vector_changes(self, since: int) -> list[tuple[int, int, bool]]:
        """Changes after ``since``, oldest first."""
        with self.db.read() as c:
            rows = c.execute(
                "SELECT seq, key, present FROM vector_log WHERE space = ? AND seq > ? ORDER BY seq",
                (self.space, since),
            ).fetchall()
        return [(int(s), int(k), bool(p)) for s, k, p in rows]

    def vectors_for(self, keys: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Current vectors of the given keys (missing keys are left out)."""
        found_keys: list[int] = []
        blobs: list[bytes] = []
        with self.db.read() as c:
            for start in range(0, len(keys), 900):
                chunk = list(keys[start:start + 900])
                rows = c.execute(
                    f"SELECT key, v FROM vectors WHERE space = ? AND key IN ({placeholders(len(chunk))})",  # noqa: E501
                    (self.space, *chunk),
                ).fetchall()
                for key, blob in rows:
                    found_keys.append(int(key))
                    blobs.append(blob)
        return self._pack(found_keys, blobs)

    def iter_all_vectors(self, batch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every current vector of the space, in batches."""
        last = -1
        while True:
            with self.db.read() as c:
                rows = c.execute(
                    "SELECT key, v FROM vectors WHERE space = ? AND key > ? ORDER BY key LIMIT ?",
                    (self.space, last, batch),
                ).fetchall()
            if not rows:
                return
            last = int(rows[-1][0])
            yield self._pack([int(r[0]) for r in rows], [r[1] for r in rows])

    def vector_count(self) -> int:
        """How many vectors the space holds."""
        with self.db.read() as c:
            row = c.execute(
                "SELECT count(*) FROM vectors WHERE space = ?", (self.space,)
            ).fetchone()
        return int(row[0])

    def _pack(self, keys: list[int], blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        if not keys:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.dim), dtype=np.float32)
        matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(keys), self.dim)
        return np.asarray(keys, dtype=np.int64), matrix


class SQLiteStore:
    """Rows of one namespace in one SQLite file.

    Args:
        directory: the store directory.
        namespace: which fully separate memory to use.
        marker: the embedder marker (``name:model/dim``) the caller will write with.
        busy_timeout_ms: see :class:`~tideline.store.sqlite.connection.Database`.
        retries: see :class:`~tideline.store.sqlite.connection.Database`.

    Raises:
        EmbedderMismatch: the store was built with another embedder.
        StoreCorrupt: the file is not a database.
        SchemaTooNew: written by a newer Tideline.
    """

    backend = "sqlite"

    def __init__(
        self, directory: Path, namespace: str, marker: str, *, busy_timeout_ms: int = 5_000,
        retries: int = 6, check_marker: bool = True,
    ) -> None:
        self.db = Database(directory, busy_timeout_ms=busy_timeout_ms, retries=retries)
        self._df_caches: dict[str, tuple[int, float, dict[str, int]]] = {}
        self.directory = directory
        self.namespace = namespace
        self.marker = marker
        if check_marker:
            self._check_marker(marker)
        with self.db.read() as c:
            # Per-connection views of the full-text vocabularies, for document frequencies.
            c.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_vocab "
                      "USING fts5vocab(main, memories_fts, row)")
            c.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.turns_vocab "
                      "USING fts5vocab(main, turns_fts, row)")

    def _check_marker(self, marker: str) -> None:
        stored = self.db.get_meta("embedder")
        if stored is None:
            with self.db.write() as c:
                c.execute(
                    "INSERT OR IGNORE INTO db_meta(key, value) VALUES ('embedder', ?)", (marker,)
                )
            stored = self.db.get_meta("embedder")
        if stored != marker:
            raise EmbedderMismatch(str(stored), marker)

    def close(self) -> None:
        """Close the database connection."""
        self.db.close()

    def transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A short ``BEGIN IMMEDIATE`` write transaction (nested use joins it).

        Raises:
            StoreBusy: the write lock could not be had after the retries.
            StoreError: any other database failure.
        """
        return self.db.write()

    def acquire_sleep_lock(self, holder: str) -> None:
        """No lock of the backend's own: one file on one host, where the lease row in
        ``sleep_state`` (taken inside a ``BEGIN IMMEDIATE``) serialises sleeps.

        Returns:
            None.
        """
        return None

    def release_sleep_lock(self, holder: str) -> None:
        """Nothing to drop (see :meth:`acquire_sleep_lock`)."""

    def backup(self, label: str, *, keep: int | None = None,
               max_bytes: int | None = None) -> Path | None:
        """Copy the database into ``backups/`` (SQLite's online backup API).

        Args:
            label: a word that ends up in the file name.
            keep: keep at most this many backups (every label counts), newest first.
            max_bytes: keep the newest backups only while they add up to this (> 0).

        Returns:
            The backup file (a backend whose database server keeps its own backups
            returns None).

        Raises:
            StoreFull: the disk filled up during the copy (nothing partial is left).
            StoreError: the copy failed.
        """
        return self.db.backup(label, keep=keep, max_bytes=max_bytes)

    def describe(self) -> dict[str, Any]:
        """Where the data lives: backend, database (file path), schema version, size."""
        try:
            size = self.db.path.stat().st_size
        except OSError:
            size = 0
        return {"backend": self.backend, "database": str(self.db.path),
                "schema_version": self.db.schema_version(), "bytes": size}

    @property
    def agent(self) -> AgentReader:
        """The reads (and small writes) of injection, hooks and importers in this namespace."""
        from tideline.store.agent import AgentReader

        return AgentReader(self.db, self.namespace)

    def doctor(
        self, embedder: Embedder, vectors: VectorSpaces, *, repair: bool,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Check integrity (database, FTS5 tables, foreign keys, row-count parity, times,
        vectors) and, with ``repair``, rebuild what is derived (see :mod:`.doctor`)."""
        from tideline.store.sqlite import doctor

        return doctor.run(self, embedder, vectors, repair=repair, progress=progress)

    def reembed(
        self, new: Embedder, *, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Any]:
        """Re-embed every memory and turn of every namespace with ``new`` and switch the
        marker at once (see :mod:`.reembed`).

        Raises:
            EmbedderError: the new embedder failed (the store is unchanged).
        """
        from tideline.store.sqlite import reembed

        return reembed.run(self, new, progress=progress)

    def vectors_pending(self) -> bool:
        """Whether some row may lack its vector (one ``db_meta`` read)."""
        from tideline.store.sqlite import pending

        return pending.flagged(self)

    def fill_pending(
        self, embed: Callable[[Sequence[str]], Vectors | None], *, limit: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Embed rows stored while the embedder was down, in batches, each in its own
        transaction (see :func:`tideline.store.sqlite.pending.fill`)."""
        from tideline.store.sqlite import pending

        return pending.fill(self, embed, limit=limit, progress=progress)

    def vector_spaces(self, dim: int, marker: str) -> VectorSpaces:
        """The vector search over this namespace: the local ANN index files kept in step
        with the ``vectors`` table (see :mod:`tideline.recall.vector_index`)."""
        from tideline.recall.vectors import VectorSpaces

        return VectorSpaces(self, dim, marker)

    def space(self, kind: str, scope: str) -> str:
        """Name of the vector space for memories (``m``) or turns (``t``) of one scope."""
        return f"{kind}:{self.namespace}:{scope}"

    def source(self, kind: str, scope: str, dim: int) -> SpaceSource:
        """The :class:`SpaceSource` of one space."""
        return SpaceSource(self.db, self.space(kind, scope), dim)

    # -- memories -------------------------------------------------------------------------

    def write_key(self, key: str, *,
                  since: float | None = None) -> tuple[int, str, float, int | None] | None:
        """The stored outcome of an idempotency key, if it was seen (at or after ``since``)."""
        with self.db.read() as c:
            row = c.execute(
                "SELECT memory_id, decision, similarity, nearest FROM write_keys "
                "WHERE namespace = ? AND key = ? AND created_at >= ?",
                (self.namespace, key, float("-inf") if since is None else since),
            ).fetchone()
        if row is None:
            return None
        return int(row[0]), str(row[1]), float(row[2]), row[3]

    def insert_memory(
        self, c: sqlite3.Connection, rec: MemoryRecord, vector: np.ndarray | None
    ) -> int:
        """Insert a memory with its index rows inside the caller's transaction."""
        cur = c.execute(
            "INSERT INTO memories(namespace, scope, kind, gesture, context, cognition_direction, "
            "tags, entities_role, related_entities, source_links, importance, emotional, "
            "recurrence, unresolved, weight, strength, stability, reinforcements, last_access, "
            "status, version, supersedes, event_time, recorded_at, updated_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                self.namespace, rec.scope, rec.kind, rec.gesture, rec.context,
                rec.cognition_direction, json_list(rec.tags), rec.entities_role,
                json_list(rec.related_entities), json_list(rec.source_links), rec.importance,
                rec.emotional, rec.recurrence, rec.unresolved, rec.weight, rec.strength,
                rec.stability,
                rec.reinforcements, rec.last_access, rec.status, rec.version, rec.supersedes,
                rec.event_time, rec.recorded_at, rec.updated_at,
            ),
        )
        mid = int(cur.lastrowid or 0)
        self._index_memory(c, mid, rec)
        if vector is not None:
            self._put_vector(c, self.space("m", rec.scope), mid, vector)
        else:
            mark_pending(c)
        return mid

    def _index_memory(self, c: sqlite3.Connection, mid: int, rec: MemoryRecord) -> None:
        body = memory_index_text(rec)
        c.execute("DELETE FROM memories_fts WHERE rowid = ?", (mid,))
        c.execute("DELETE FROM memories_tri WHERE rowid = ?", (mid,))
        c.execute(
            "INSERT INTO memories_fts(rowid, body) VALUES (?, ?)", (mid, fts.index_text(body))
        )
        c.execute("INSERT INTO memories_tri(rowid, body) VALUES (?, ?)", (mid, body))

    def _put_vector(self, c: sqlite3.Connection, space: str, key: int, vector: np.ndarray) -> None:
        blob = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
        c.execute(
            "INSERT INTO vectors(space, key, v) VALUES (?, ?, ?) "
            "ON CONFLICT(space, key) DO UPDATE SET v = excluded.v",
            (space, key, blob),
        )
        c.execute("INSERT INTO vector_log(space, key, present) VALUES (?, ?, 1)", (space, key))

    def _drop_vector(self, c: sqlite3.Connection, space: str, key: int) -> None:
        cur = c.execute("DELETE FROM vectors WHERE space = ? AND key = ?", (space, key))
        if cur.rowcount:
            c.execute("INSERT INTO vector_log(space, key, present) VALUES (?, ?, 0)", (space, key))

    def update_memory(self, c: sqlite3.Connection, rec: MemoryRecord) -> None:
        """Write back every mutable field of ``rec`` (same id) and refresh its index rows."""
        c.execute(
            "UPDATE memories SET kind=?, gesture=?, context=?, cognition_direction=?, tags=?, "
            "entities_role=?, related_entities=?, source_links=?, importance=?, emotional=?, "
            "recurrence=?, unresolved=?, weight=?, strength=?, stability=?, reinforcements=?, "
            "last_access=?, status=?, version=?, event_time=?, updated_at=? "
            "WHERE id = ? AND namespace = ?",
            (
                rec.kind, rec.gesture, rec.context, rec.cognition_direction, json_list(rec.tags),
                rec.entities_role, json_list(rec.related_entities), json_list(rec.source_links),
                rec.importance, rec.emotional, rec.recurrence, rec.unresolved, rec.weight,
                rec.strength, rec.stability, rec.reinforcements, rec.last_access, rec.status,
                rec.version, rec.event_time, rec.updated_at, rec.id, self.namespace,
            ),
        )
        self._index_memory(c, rec.id, rec)

    def set_status(self, c: sqlite3.Connection, mid: int, status: str, now: float) -> None:
        """Change a memory's status (e.g. to ``superseded``) and bump its version."""
        c.execute(
            "UPDATE memories SET status = ?, version = version + 1, updated_at = ? "
            "WHERE id = ? AND namespace = ?",
            (status, now, mid, self.namespace),
        )

    def record_write_key(
        self, c: sqlite3.Connection, key: str, mid: int, decision: str, similarity: float,
        nearest: int | None, now: float, *, refresh: bool = False,
    ) -> None:
        """Remember the outcome of an idempotency key (``refresh``: replace an older one)."""
        verb = "INSERT OR REPLACE" if refresh else "INSERT OR IGNORE"
        c.execute(
            f"{verb} INTO write_keys(namespace, key, memory_id, decision, similarity, "
            "nearest, created_at) VALUES (?,?,?,?,?,?,?)",
            (self.namespace, key, mid, decision, similarity, nearest, now),
        )

    def delete_memory(self, c: sqlite3.Connection, mid: int) -> MemoryRecord:
        """Really delete a memory: row, full-text rows, vector, edges, idempotency keys.

        Raises:
            NotFound: no such memory in this namespace.
        """
        rec = self.get_memory(mid, c)
        c.execute("DELETE FROM memories_fts WHERE rowid = ?", (mid,))
        c.execute("DELETE FROM memories_tri WHERE rowid = ?", (mid,))
        self._drop_vector(c, self.space("m", rec.scope), mid)
        c.execute("DELETE FROM write_keys WHERE namespace = ? AND memory_id = ?",
                  (self.namespace, mid))
        c.execute("DELETE FROM attention_log WHERE namespace = ? AND memory_id = ?",
                  (self.namespace, mid))
        c.execute("DELETE FROM eligibility WHERE namespace = ? AND memory_id = ?",
                  (self.namespace, mid))
        c.execute("DELETE FROM memories WHERE id = ? AND namespace = ?", (mid, self.namespace))
        return rec

    def get_memory(self, mid: int, c: sqlite3.Connection | None = None) -> MemoryRecord:
        """One memory by id.

        Raises:
            NotFound: no such memory in this namespace.
        """
        found = self.get_memories([mid], c)
        if mid not in found:
            raise NotFound(f"no memory with id {mid}")
        return found[mid]

    def get_memories(
        self, ids: Iterable[int], c: sqlite3.Connection | None = None
    ) -> dict[int, MemoryRecord]:
        """Memories by id (missing ids are left out)."""
        wanted = list(dict.fromkeys(int(i) for i in ids))
        out: dict[int, MemoryRecord] = {}
        for start in range(0, len(wanted), 900):
            chunk = wanted[start:start + 900]
            # "+namespace": look rows up by primary key, not by walking the namespace index.
            sql = (f"SELECT {MEMORY_COLUMNS} FROM memories WHERE +namespace = ? "
                   f"AND id IN ({placeholders(len(chunk))})")
            if c is not None:
                rows = c.execute(sql, (self.namespace, *chunk)).fetchall()
            else:
                with self.db.read() as conn:
                    rows = conn.execute(sql, (self.namespace, *chunk)).fetchall()
            for row in rows:
                rec = memory_from_row(row)
                out[rec.id] = rec
        return out

    def list_memories(
        self, *, scopes: Sequence[str] | None = None, kind: str | None = None,
        status: Sequence[str] | None = None, order: str = "recorded_at DESC", limit: int = 50,
        min_weight: float | None = None,
    ) -> list[MemoryRecord]:
        """Memories matching simple filters, newest first by default."""
        where, args = self._filters(scopes=scopes, kind=kind)
        if status:
            where.append(f"status IN ({placeholders(len(status))})")
            args.extend(status)
        if min_weight is not None:
            where.append("weight > ?")
            args.append(min_weight)
        if order not in ("recorded_at DESC", "weight DESC", "id ASC", "last_access DESC"):
            order = "recorded_at DESC"
        sql = (f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {' AND '.join(where)} "
               f"ORDER BY {order} LIMIT ?")
        with self.db.read() as c:
            rows = c.execute(sql, (*args, limit)).fetchall()
        return [memory_from_row(r) for r in rows]

    def _filters(
        self, *, scopes: Sequence[str] | None, kind: str | None = None, alias: str = "",
        since: float | None = None, until: float | None = None,
    ) -> tuple[list[str], list[Any]]:
        p = f"{alias}." if alias else ""
        # With an alias (a join from a full-text table) the FTS match must drive the
        # query; "+" keeps the planner from scanning the scope index instead.
        plus = "+" if alias else ""
        where = [f"{plus}{p}namespace = ?"]
        args: list[Any] = [self.namespace]
        if scopes is not None:
            where.append(f"{plus}{p}scope IN ({placeholders(len(scopes))})")
            args.extend(scopes)
        if kind:
            where.append(f"{p}kind = ?")
            args.append(kind)
        if since is not None:
            where.append(f"coalesce({p}event_time, {p}recorded_at) >= ?")
            args.append(since)
        if until is not None:
            where.append(f"coalesce({p}event_time, {p}recorded_at) <= ?")
            args.append(until)
        return where, args

    def memory_vectors(self, recs: Sequence[MemoryRecord], dim: int) -> dict[int, np.ndarray]:
        """Stored vectors of the given memories (looked up in each one's scope space)."""
        out: dict[int, np.ndarray] = {}
        by_space: dict[str, list[int]] = {}
        for rec in recs:
            by_space.setdefault(self.space("m", rec.scope), []).append(rec.id)
        for space, keys in by_space.items():
            found, matrix = SpaceSource(self.db, space, dim).vectors_for(keys)
            for k, v in zip(found.tolist(), matrix, strict=True):
                out[int(k)] = v
        return out

    def search_memories(
        self, query: LexicalQuery, *, substrings: bool, scopes: Sequence[str], limit: int,
        kind: str | None = None, since: float | None = None, until: float | None = None,
        include_superseded: bool = False,
    ) -> list[tuple[int, float]]:
        """(memory id, bm25) best first for a lexical query.

        Args:
            query: the terms to look for.
            substrings: search the trigram (identifier, substring) table instead of the
                word table.
            scopes: only memories of these scopes.
            limit: most hits.
            kind: only memories of this kind.
            since: only memories whose event (or record) time is at or after this epoch.
            until: only memories at or before this epoch.
            include_superseded: also superseded versions.
        """
        words, tri = fts.expressions(query)
        expression = tri if substrings else words
        if not expression:
            return []
        return self.match_memories(
            expression, "memories_tri" if substrings else "memories_fts", scopes=scopes,
            limit=limit, kind=kind, since=since, until=until,
            include_superseded=include_superseded)

    def match_memories(
        self, expression: str, table: str, *, scopes: Sequence[str], limit: int,
        kind: str | None = None, since: float | None = None, until: float | None = None,
        include_superseded: bool = False,
    ) -> list[tuple[int, float]]:
        """(memory id, bm25) best first for an FTS5 expression on ``memories_fts``/``_tri``
        (SQLite only: raw FTS5 syntax, for :meth:`search_memories` and the benchmarks)."""
        if table not in ("memories_fts", "memories_tri"):
            raise ValueError(table)
        where, args = self._filters(scopes=scopes, kind=kind, alias="m", since=since, until=until)
        if not include_superseded:
            where.append("m.status != 'superseded'")
        # Fast path: rank inside the full-text index alone (no join per match), then keep
        # the allowed rows of an over-fetched top. Fall back to the joined query only when
        # the filters threw too much of that top away.
        fetch = limit * 4
        top_sql = f"SELECT rowid, bm25({table}) AS r FROM {table} WHERE {table} MATCH ? " \
                  f"ORDER BY r LIMIT ?"
        with self.db.read() as c:
            top = c.execute(top_sql, (expression, fetch)).fetchall()
            if top:
                ids = [int(r[0]) for r in top]
                keep_sql = (f"SELECT m.id FROM memories m WHERE m.id IN "
                            f"({placeholders(len(ids))}) AND {' AND '.join(where)}")
                allowed = {int(r[0]) for r in c.execute(keep_sql, (*ids, *args)).fetchall()}
                rows = [r for r in top if int(r[0]) in allowed][:limit]
                if len(rows) >= limit or len(top) < fetch:
                    return [(int(r[0]), float(r[1])) for r in rows]
            sql = (f"SELECT f.rowid, bm25({table}) AS r FROM {table} f "
                   f"JOIN memories m ON m.id = f.rowid WHERE {table} MATCH ? AND "
                   f"{' AND '.join(where)} ORDER BY r LIMIT ?")
            rows = c.execute(sql, (expression, *args, limit)).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def document_frequencies(
        self, kind: str, tokens: Sequence[str]
    ) -> tuple[dict[str, int], int]:
        """How many rows of memories (``m``) or turns (``t``) hold each index token.

        Counting a token's rows walks its posting list, which is slow for common tokens
        in a large store (a millisecond per 25k rows), so large counts are kept in a
        small per-process cache. The cache of a table is dropped when its row count has
        moved by more than 1 % or after a minute: a large count that is slightly stale
        changes no decision made with it (weights and the posting budget).

        Returns:
            Document frequency per token (missing tokens are 0) and an estimate of the
            row count (the highest rowid: O(1), never below the true count of live rows
            by much, as ids are not reused).
        """
        vocab, table = ("memories_vocab", "memories") if kind == "m" else ("turns_vocab",
                                                                           "turns")
        out: dict[str, int] = {}
        with self.db.read() as c:
            total = int(c.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
                        or 0)
            cache = self._df_cache_for(kind, total)
            for token in dict.fromkeys(tokens):
                hit = cache.get(token)
                if hit is None:
                    row = c.execute(f"SELECT doc FROM temp.{vocab} WHERE term = ?",
                                    (token,)).fetchone()
                    hit = int(row[0]) if row else 0
                    if hit >= _DF_CACHE_MIN and len(cache) < _DF_CACHE_SIZE:
                        cache[token] = hit
                out[token] = hit
        return out, total

    def _df_cache_for(self, kind: str, total: int) -> dict[str, int]:
        """The document-frequency cache of one table, emptied when it went stale."""
        now = time.monotonic()
        cached = self._df_caches.get(kind)
        if (cached is None or now - cached[1] > _DF_CACHE_SECONDS
                or abs(total - cached[0]) > 0.01 * max(cached[0], 1)):
            cached = (total, now, {})
            self._df_caches[kind] = cached
        return cached[2]

    # -- edges ----------------------------------------------------------------------------

    def add_edge(
        self, c: sqlite3.Connection, src: int, dst: int, etype: str, weight: float, now: float
    ) -> None:
        """Create or strengthen a typed edge (weights add up, capped at 1)."""
        c.execute(
            "INSERT INTO edges(src, dst, type, weight, created_at, updated_at) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT(src, dst, type) DO UPDATE SET "
            "weight = min(1.0, edges.weight + excluded.weight), updated_at = excluded.updated_at",
            (src, dst, etype, weight, now, now),
        )

    def copy_edges(
        self, c: sqlite3.Connection, old: int, new: int, types: Sequence[str], now: float
    ) -> None:
        """Give a new version the associative edges of the version it supersedes."""
        ph = placeholders(len(types))
        c.execute(
            f"INSERT OR IGNORE INTO edges(src, dst, type, weight, created_at, updated_at) "
            f"SELECT ?, dst, type, weight, ?, ? FROM edges WHERE src = ? AND dst != ? "
            f"AND type IN ({ph})", (new, now, now, old, new, *types),
        )
        c.execute(
            f"INSERT OR IGNORE INTO edges(src, dst, type, weight, created_at, updated_at) "
            f"SELECT src, ?, type, weight, ?, ? FROM edges WHERE dst = ? AND src != ? "
            f"AND type IN ({ph})", (new, now, now, old, new, *types),
        )

    def edges_of(self, ids: Sequence[int], types: Sequence[str] | None = None) -> list[Edge]:
        """Edges touching any of ``ids`` (both directions)."""
        if not ids:
            return []
        idl = list(ids)[:900]
        ph = placeholders(len(idl))
        sql = f"SELECT src, dst, type, weight FROM edges WHERE (src IN ({ph}) OR dst IN ({ph}))"
        args: list[Any] = [*idl, *idl]
        if types:
            sql += f" AND type IN ({placeholders(len(types))})"
            args.extend(types)
        with self.db.read() as c:
            rows = c.execute(sql, args).fetchall()
        return [Edge(int(a), int(b), str(t), float(w)) for a, b, t, w in rows]

    # -- turns ----------------------------------------------------------------------------

    def existing_turn_keys(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The internal id of each (source, message id) pair that is already stored."""
        out: dict[tuple[str, str], int] = {}
        with self.db.read() as c:
            for source, mid in keys:
                row = c.execute(
                    "SELECT id FROM turns WHERE namespace = ? AND source = ? AND message_id = ?",
                    (self.namespace, source, mid),
                ).fetchone()
                if row:
                    out[(source, mid)] = int(row[0])
        return out

    def insert_turns(
        self, c: sqlite3.Connection, turns: Sequence[Turn],
        vectors: Sequence[np.ndarray | None],
    ) -> list[int]:
        """Insert raw turns in order inside the caller's write transaction.

        Each new turn takes the next free index of its session, read inside this
        transaction (``BEGIN IMMEDIATE``): indexes stay contiguous and unique per session
        under concurrent writers and after a resumed import; the ``turn_index`` the turn
        carries is ignored. A turn whose (source, message id) is stored already is skipped
        and takes no index.

        Returns:
            The new internal id of each turn, 0 for one that was stored already.
        """
        places: dict[str, int] = {}
        out: list[int] = []
        for turn, vector in zip(turns, vectors, strict=True):
            if turn.session not in places:
                row = c.execute(
                    "SELECT max(turn_index) FROM turns WHERE namespace = ? AND session = ?",
                    (self.namespace, turn.session),
                ).fetchone()
                places[turn.session] = 0 if row[0] is None else int(row[0]) + 1
            # Only the (source, message id) conflict means "stored already"; a clash on
            # the session's place would be a bug and must raise, not drop the turn.
            cur = c.execute(
                "INSERT INTO turns(namespace, scope, session, turn_index, speaker, role, "
                "text, ts, source, message_id, recorded_at) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(namespace, source, message_id) DO NOTHING",
                (self.namespace, turn.scope, turn.session, places[turn.session], turn.speaker,
                 turn.role, turn.text, turn.timestamp, turn.source, turn.message_id,
                 turn.recorded_at),
            )
            if not cur.rowcount:
                out.append(0)
                continue
            places[turn.session] += 1
            tid = int(cur.lastrowid or 0)
            body = turn_index_text(turn.speaker, turn.text)
            c.execute("INSERT INTO turns_fts(rowid, body) VALUES (?, ?)",
                      (tid, fts.index_text(body)))
            c.execute("INSERT INTO turns_tri(rowid, body) VALUES (?, ?)", (tid, body))
            if vector is not None:
                self._put_vector(c, self.space("t", turn.scope), tid, vector)
            else:
                mark_pending(c)
            out.append(tid)
        return out

    def previous_turn(self, session: str, turn_index: int) -> Turn | None:
        """The turn just before ``turn_index`` in a session, if stored."""
        found = self.session_turns(session, around=turn_index - 1, radius=0, limit=1)
        return found[0] if found else None

    def next_turn_index(self, session: str) -> int:
        """The next free turn index in a session, as of now (a hint: see ``insert_turns``)."""
        with self.db.read() as c:
            row = c.execute(
                "SELECT max(turn_index) FROM turns WHERE namespace = ? AND session = ?",
                (self.namespace, session),
            ).fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def get_turns(self, ids: Iterable[int]) -> dict[int, Turn]:
        """Turns by internal id."""
        wanted = list(dict.fromkeys(int(i) for i in ids))
        out: dict[int, Turn] = {}
        with self.db.read() as c:
            for start in range(0, len(wanted), 900):
                chunk = wanted[start:start + 900]
                rows = c.execute(
                    f"SELECT {TURN_COLUMNS} FROM turns WHERE +namespace = ? "
                    f"AND id IN ({placeholders(len(chunk))})",
                    (self.namespace, *chunk),
                ).fetchall()
                for row in rows:
                    t = turn_from_row(row)
                    out[t.id] = t
        return out

    def speakers_since(self, after_id: int) -> tuple[int, list[tuple[str, str]]]:
        """The newest turn id and the distinct (scope, speaker) pairs of turns after
        ``after_id`` (turn ids only grow, so a caller can keep a running set)."""
        with self.db.read() as c:
            last = c.execute("SELECT max(id) FROM turns").fetchone()[0]
            if last is None or int(last) <= after_id:
                return after_id, []
            rows = c.execute(
                "SELECT DISTINCT scope, speaker FROM turns WHERE id > ? AND namespace = ?",
                (after_id, self.namespace)).fetchall()
        return int(last), [(str(a), str(b)) for a, b in rows]

    def neighbour_turns(self, hits: Sequence[Turn], radius: int = 1) -> list[Turn]:
        """The turns within ``radius`` places of each hit in its own session (hits included)."""
        if not hits:
            return []
        where = " OR ".join(["(session = ? AND turn_index BETWEEN ? AND ?)"] * len(hits))
        args: list[Any] = [self.namespace]
        for t in hits:
            args += [t.session, t.turn_index - radius, t.turn_index + radius]
        sql = f"SELECT {TURN_COLUMNS} FROM turns WHERE namespace = ? AND ({where})"
        with self.db.read() as c:
            rows = c.execute(sql, args).fetchall()
        return [turn_from_row(r) for r in rows]

    def turns_between(
        self, scopes: Sequence[str], start: float, end: float, limit: int
    ) -> list[Turn]:
        """Turns of ``scopes`` spoken in ``[start, end)`` (by their timestamp), oldest first."""
        sql = (f"SELECT {TURN_COLUMNS} FROM turns WHERE namespace = ? "
               f"AND scope IN ({placeholders(len(scopes))}) AND ts >= ? AND ts < ? "
               f"ORDER BY ts LIMIT ?")
        with self.db.read() as c:
            rows = c.execute(sql, (self.namespace, *scopes, start, end, limit)).fetchall()
        return [turn_from_row(r) for r in rows]

    def session_turns(
        self, session: str, *, around: int | None = None, radius: int = 3, limit: int = 200,
        scopes: Sequence[str] | None = None,
    ) -> list[Turn]:
        """Turns of one session in order, optionally only those near a turn index.

        ``scopes`` keeps only turns of those scopes (a session name is not unique across
        projects); None reads every scope (internal callers that place a turn themselves).
        """
        sql = f"SELECT {TURN_COLUMNS} FROM turns WHERE namespace = ? AND session = ?"
        args: list[Any] = [self.namespace, session]
        if scopes is not None:
            sql += f" AND scope IN ({placeholders(len(scopes))})"
            args.extend(scopes)
        if around is not None:
            sql += " AND turn_index BETWEEN ? AND ?"
            args += [around - radius, around + radius]
        sql += " ORDER BY turn_index LIMIT ?"
        with self.db.read() as c:
            rows = c.execute(sql, (*args, limit)).fetchall()
        return [turn_from_row(r) for r in rows]

    def search_turns(
        self, query: LexicalQuery, *, substrings: bool, scopes: Sequence[str], limit: int,
        since: float | None = None, until: float | None = None,
    ) -> list[tuple[int, float]]:
        """(turn id, bm25) best first for a lexical query.

        Args:
            query: the terms to look for.
            substrings: search the trigram (identifier, substring) table instead of the
                word table.
            scopes: only turns of these scopes.
            limit: most hits.
            since: only turns spoken (or recorded) at or after this epoch.
            until: only turns at or before this epoch.
        """
        words, tri = fts.expressions(query)
        expression = tri if substrings else words
        if not expression:
            return []
        return self.match_turns(expression, "turns_tri" if substrings else "turns_fts",
                                scopes=scopes, limit=limit, since=since, until=until)

    def match_turns(
        self, expression: str, table: str, *, scopes: Sequence[str], limit: int,
        since: float | None = None, until: float | None = None,
    ) -> list[tuple[int, float]]:
        """(turn id, bm25) best first for an FTS5 expression on ``turns_fts``/``_tri``
        (SQLite only: raw FTS5 syntax, for :meth:`search_turns` and the benchmarks)."""
        if table not in ("turns_fts", "turns_tri"):
            raise ValueError(table)
        where = ["+t.namespace = ?", f"+t.scope IN ({placeholders(len(scopes))})"]
        args: list[Any] = [self.namespace, *scopes]
        if since is not None:
            where.append("coalesce(t.ts, t.recorded_at) >= ?")
            args.append(since)
        if until is not None:
            where.append("coalesce(t.ts, t.recorded_at) <= ?")
            args.append(until)
        sql = (f"SELECT f.rowid, bm25({table}) AS r FROM {table} f "
               f"JOIN turns t ON t.id = f.rowid WHERE {table} MATCH ? AND "
               f"{' AND '.join(where)} ORDER BY r LIMIT ?")
        with self.db.read() as c:
            rows = c.execute(sql, (expression, *args, limit)).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def turn_vectors(self, turns: Sequence[Turn], dim: int) -> dict[int, np.ndarray]:
        """Stored vectors of the given turns (looked up in each one's scope space)."""
        by_space: dict[str, list[int]] = {}
        for t in turns:
            by_space.setdefault(self.space("t", t.scope), []).append(t.id)
        out: dict[int, np.ndarray] = {}
        for space, keys in by_space.items():
            found, matrix = SpaceSource(self.db, space, dim).vectors_for(keys)
            for k, v in zip(found.tolist(), matrix, strict=True):
                out[int(k)] = v
        return out

    # -- archive ------------------------------------------------------------------------

    def archive_snapshot(
        self, namespace: str | None
    ) -> contextlib.AbstractContextManager[SQLiteSnapshot]:
        """A read snapshot for the archive (see :mod:`.dump`)."""
        from tideline.store.sqlite import dump

        return dump.snapshot(self, namespace)

    def archive_loader(self, dim: int) -> contextlib.AbstractContextManager[SQLiteLoader]:
        """One write transaction that loads archived rows (see :mod:`.dump`)."""
        from tideline.store.sqlite import dump

        return dump.load(self, dim)

    # -- journal, scopes, stats -----------------------------------------------------------

    def log_event(
        self, c: sqlite3.Connection | None, kind: str, data: dict[str, Any],
        memory_id: int | None = None, now: float | None = None,
    ) -> int:
        """Append one event to the journal (inside ``c`` if given, else its own
        transaction); returns its id (see :func:`tideline.store.events.append_event`)."""
        if c is not None:
            return append_event(c, self.namespace, kind, data, memory_id=memory_id, now=now)
        with self.db.write() as conn:
            return append_event(conn, self.namespace, kind, data, memory_id=memory_id, now=now)

    def events(
        self, *, kinds: Sequence[str] | None = None, limit: int = 50, since: float | None = None
    ) -> list[dict[str, Any]]:
        """Journal entries, newest first."""
        sql = "SELECT id, ts, kind, memory_id, data FROM events WHERE namespace = ?"
        args: list[Any] = [self.namespace]
        if kinds:
            sql += f" AND kind IN ({placeholders(len(kinds))})"
            args.extend(kinds)
        if since is not None:
            sql += " AND ts >= ?"
            args.append(since)
        sql += " ORDER BY id DESC LIMIT ?"
        with self.db.read() as c:
            rows = c.execute(sql, (*args, limit)).fetchall()
        return [
            {"id": r[0], "ts": r[1], "kind": r[2], "memory_id": r[3], "data": json.loads(r[4])}
            for r in rows
        ]

    def scopes(self) -> list[str]:
        """Every scope that holds memories or turns in this namespace."""
        with self.db.read() as c:
            rows = c.execute(
                "SELECT scope FROM memories WHERE namespace = ? UNION "
                "SELECT scope FROM turns WHERE namespace = ?",
                (self.namespace, self.namespace),
            ).fetchall()
        return sorted(str(r[0]) for r in rows)

    def stats(self) -> dict[str, Any]:
        """Counts by kind, scope and status, plus turns, edges and events."""
        ns = self.namespace
        with self.db.read() as c:
            def grouped(col: str) -> dict[str, int]:
                rows = c.execute(
                    f"SELECT {col}, count(*) FROM memories WHERE namespace = ? GROUP BY {col}",
                    (ns,),
                ).fetchall()
                return {str(k): int(v) for k, v in rows}

            return {
                "memories": int(c.execute("SELECT count(*) FROM memories WHERE namespace = ?",
                                          (ns,)).fetchone()[0]),
                "by_kind": grouped("kind"),
                "by_scope": grouped("scope"),
                "by_status": grouped("status"),
                "turns": int(c.execute("SELECT count(*) FROM turns WHERE namespace = ?",
                                       (ns,)).fetchone()[0]),
                "sessions": int(c.execute(
                    "SELECT count(DISTINCT session) FROM turns WHERE namespace = ?",
                    (ns,)).fetchone()[0]),
                "edges": dict(c.execute(
                    "SELECT e.type, count(*) FROM edges e JOIN memories m ON m.id = e.src "
                    "WHERE m.namespace = ? GROUP BY e.type", (ns,)).fetchall()),
                "events": int(c.execute("SELECT count(*) FROM events WHERE namespace = ?",
                                        (ns,)).fetchone()[0]),
            }


