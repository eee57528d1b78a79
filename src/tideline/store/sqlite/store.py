"""The SQLite implementation of the :class:`~tideline.store.Store` protocol.

One file holds everything; the full-text tables and the vector log are kept in
step with the rows inside the same short transaction. Vector index files are
derived from the ``vectors`` table (see :mod:`tideline.store.sqlite.vector_index`). The
row code both backends share is in :class:`~tideline.store.namespace.NamespaceRows`;
this module keeps what is SQLite's own (FTS5 rows, vector blobs and their change log,
the single-writer turn insert, planner hints).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tideline.models import LexicalQuery, MemoryRecord, Turn
from tideline.store import fts_query as fts
from tideline.store.namespace import DF_CACHE_MIN, DF_CACHE_SIZE, NamespaceRows
from tideline.store.rowcache import TURN_VECTORS, RowCache
from tideline.store.rows import (
    MEMORY_COLUMNS,
    TURN_COLUMNS,
    memory_from_row,
    memory_index_text,
    turn_from_row,
    turn_index_text,
)
from tideline.store.sql import padded, placeholders
from tideline.store.sqlite.connection import Database
from tideline.store.sqlite.vector_source import SpaceSource

if TYPE_CHECKING:
    from tideline.embed.base import Embedder, Vectors
    from tideline.store.sqlite.dump import SQLiteLoader, SQLiteSnapshot
    from tideline.store.sqlite.vector_spaces import VectorSpaces

__all__ = ["SQLiteStore"]

#: Tokens counted per vocabulary statement (well under SQLite's bound parameters).
_VOCAB_CHUNK = 500
#: Most vector-log entries replayed to keep the turn-vector cache; past it, the cache
#: starts over (a bulk import or a reembed changed most vectors anyway).
_VECTOR_LOG_READ = 5_000


class SQLiteStore(NamespaceRows):
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
    db: Database
    _no_index = "+"

    def __init__(
        self, directory: Path, namespace: str, marker: str, *, busy_timeout_ms: int = 5_000,
        retries: int = 6, check_marker: bool = True,
    ) -> None:
        self.db = Database(directory, busy_timeout_ms=busy_timeout_ms, retries=retries)
        self._df_caches: dict[str, tuple[int, float, dict[str, int]]] = {}
        self._turn_vecs: RowCache[tuple[str, int], np.ndarray] = RowCache(TURN_VECTORS)
        self._turn_vecs_seq = 0
        self._df_exact: dict[str, tuple[tuple[Any, ...], dict[str, int]]] = {}
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

    def parallel_reads(self) -> bool:
        """False: SQLite runs in this process, a second thread would only share its cores."""
        return False

    def reads_beside(self) -> bool:
        """Whether another thread may read now without waiting for this one: no
        transaction is open on the connection (the caller's own would hold the lock
        that thread's reads take until it ends)."""
        return not self.db.conn.in_transaction

    def statements_sent(self) -> None:
        """None: nothing is sent, SQLite runs in this process."""
        return None

    def describe(self) -> dict[str, Any]:
        """Where the data lives: backend, database (file path), schema version, size."""
        try:
            size = self.db.path.stat().st_size
        except OSError:
            size = 0
        return {"backend": self.backend, "database": str(self.db.path),
                "schema_version": self.db.schema_version(), "bytes": size}

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
        from tideline.store import pending

        return pending.flagged(self)

    def fill_pending(
        self, embed: Callable[[Sequence[str]], Vectors | None], *, limit: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Embed rows stored while the embedder was down, in batches, each in its own
        transaction (see :func:`tideline.store.pending.fill`)."""
        from tideline.store import pending

        return pending.fill(self, embed, limit=limit, progress=progress)

    def vector_spaces(self, dim: int, marker: str) -> VectorSpaces:
        """The vector search over this namespace: the local ANN index files kept in step
        with the ``vectors`` table (see :mod:`tideline.store.sqlite.vector_index`)."""
        from tideline.store.sqlite.vector_spaces import VectorSpaces

        return VectorSpaces(self, dim, marker)

    def source(self, kind: str, scope: str, dim: int) -> SpaceSource:
        """The :class:`SpaceSource` of one space."""
        return SpaceSource(self.db, self.space(kind, scope), dim)

    # -- memories -------------------------------------------------------------------------

    def _hold_write_key(self, c: sqlite3.Connection, key: str) -> None:
        """Nothing to take: a write transaction (``BEGIN IMMEDIATE``) is the only writer."""

    def _index_memory(self, c: sqlite3.Connection, mid: int, rec: MemoryRecord) -> None:
        body = memory_index_text(rec)
        c.execute("DELETE FROM memories_fts WHERE rowid = ?", (mid,))
        c.execute("DELETE FROM memories_tri WHERE rowid = ?", (mid,))
        c.execute(
            "INSERT INTO memories_fts(rowid, body) VALUES (?, ?)", (mid, fts.index_text(body))
        )
        c.execute("INSERT INTO memories_tri(rowid, body) VALUES (?, ?)", (mid, body))

    def _unindex_memory(self, c: sqlite3.Connection, mid: int) -> None:
        c.execute("DELETE FROM memories_fts WHERE rowid = ?", (mid,))
        c.execute("DELETE FROM memories_tri WHERE rowid = ?", (mid,))

    def _index_turn(self, c: sqlite3.Connection, tid: int, speaker: str, text: str) -> None:
        body = turn_index_text(speaker, text)
        c.execute("INSERT INTO turns_fts(rowid, body) VALUES (?, ?)", (tid, fts.index_text(body)))
        c.execute("INSERT INTO turns_tri(rowid, body) VALUES (?, ?)", (tid, body))

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

    def get_memories(
        self, ids: Iterable[int], c: sqlite3.Connection | None = None
    ) -> dict[int, MemoryRecord]:
        """Memories by id (missing ids are left out)."""
        wanted = list(dict.fromkeys(int(i) for i in ids))
        out: dict[int, MemoryRecord] = {}
        for start in range(0, len(wanted), 900):
            chunk = padded(wanted[start:start + 900], 900)
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

    def memory_vectors_in(self, ids: Sequence[int], scopes: Sequence[str],
                          dim: int) -> dict[tuple[str, int], np.ndarray]:
        """(scope, memory id) → stored vector, looked up in each scope's space."""
        out: dict[tuple[str, int], np.ndarray] = {}
        keys = [int(i) for i in ids]
        for scope in dict.fromkeys(scopes):
            found, matrix = SpaceSource(self.db, self.space("m", scope), dim).vectors_for(keys)
            for k, v in zip(found.tolist(), matrix, strict=True):
                out[(scope, int(k))] = v
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
        expression = fts.expression(query, substrings=substrings)
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
                ids = padded([int(r[0]) for r in top], fetch)
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

        The vocabulary counts the rows of every namespace of the file. A file that
        holds only this namespace's rows (two index lookups tell) reads it; a file
        shared with other namespaces counts each token's rows of this namespace
        instead (its posting list joined to the rows), so the weights are this
        namespace's alone, as on PostgreSQL.

        Returns:
            Document frequency per token (missing tokens are 0) and an estimate of the
            row count (the namespace's highest id: O(1) in a file of one namespace,
            never below the true count of live rows by much, as ids are not reused).
        """
        vocab, table = ("memories_vocab", "memories") if kind == "m" else ("turns_vocab",
                                                                           "turns")
        out: dict[str, int] = {}
        with self.db.read() as c:
            total = int(c.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
                        or 0)
            lo, hi = c.execute(f"SELECT (SELECT min(namespace) FROM {table}), "  # noqa: S608
                               f"(SELECT max(namespace) FROM {table})").fetchone()
            shared = not lo == hi == self.namespace
            if shared and total:
                # Backwards from the highest id to this namespace's last row ("+": not the
                # namespace index, which would read all of its rows: 25 ms at 100k).
                top = c.execute(f"SELECT id FROM {table} WHERE +namespace = ? "  # noqa: S608
                                "ORDER BY id DESC LIMIT 1", (self.namespace,)).fetchone()
                total = int(top[0]) if top else 0
            cache = self._df_cache_for(kind, total)
            if total == 0:  # no row was ever stored: nothing holds any token
                return dict.fromkeys(tokens, 0), 0
            exact = self._df_exact_for(c, kind, (total, shared))
            wanted = [t for t in dict.fromkeys(tokens) if t not in cache
                      and (exact is None or t not in exact)]
            counted: dict[str, int] = {}
            if shared:
                words = f"{table}_fts"
                for token in wanted:
                    if fts.has_token(token):
                        counted[token] = int(c.execute(
                            # "+": the posting list drives, not the namespace's rows.
                            f"SELECT count(*) FROM {words} f JOIN {table} x ON x.id = "  # noqa: S608
                            f"f.rowid WHERE {words} MATCH ? AND +x.namespace = ?",
                            (fts.quote(token), self.namespace)).fetchone()[0])
                wanted = []
            # One statement per chunk: the vocabulary table looks each term up on its own
            # either way, and a statement per token cost most of this call.
            for start in range(0, len(wanted), _VOCAB_CHUNK):
                chunk = padded(wanted[start:start + _VOCAB_CHUNK], _VOCAB_CHUNK)
                counted.update((str(term), int(doc)) for term, doc in c.execute(
                    f"SELECT term, doc FROM temp.{vocab} WHERE term IN "
                    f"({placeholders(len(chunk))})", chunk).fetchall())
            for token in dict.fromkeys(tokens):
                hit = cache.get(token)
                if hit is None:
                    known = exact.get(token) if exact is not None else None
                    hit = counted.get(token, 0) if known is None else known
                    if known is None and exact is not None and len(exact) < DF_CACHE_SIZE:
                        exact[token] = hit
                    if hit >= DF_CACHE_MIN and len(cache) < DF_CACHE_SIZE:
                        cache[token] = hit
                out[token] = hit
        return out, total

    def _df_exact_for(self, c: sqlite3.Connection, kind: str,
                      key: tuple[Any, ...]) -> dict[str, int] | None:
        """The exact document-frequency cache of one table's word index as it is now
        (None inside a transaction, where pending changes may not show in the records).

        Counting a token walks its whole posting list (a name held by most turns costs
        as much as the rest of the query's tokens together), and the queries of one
        conversation ask the same names again and again. FTS5 rewrites its structure
        record (``id = 10`` of the ``_data`` table: the segments and a counter of every
        segment written) at each change of the index, and its averages record
        (``id = 1``: rows and tokens) with it; with the table's highest row id they key
        the cache, so a count is kept exactly as long as the index it was counted in,
        whichever connection or process changed it.
        """
        if c.in_transaction:
            return None
        data = "memories_fts_data" if kind == "m" else "turns_fts_data"
        state = (*key, *(block for _, block in c.execute(
            f"SELECT id, block FROM {data} WHERE id IN (1, 10) ORDER BY id").fetchall()))  # noqa: S608
        found = self._df_exact.get(kind)
        if found is None or found[0] != state:
            found = (state, {})
            self._df_exact[kind] = found
        return found[1]

    # -- turns ----------------------------------------------------------------------------

    def existing_turn_keys(
        self, keys: Sequence[tuple[str, str, str]],
    ) -> dict[tuple[str, str, str], int]:
        """The internal id of each (scope, source, message id) triple already stored."""
        out: dict[tuple[str, str, str], int] = {}
        with self.db.read() as c:
            for scope, source, mid in keys:
                row = c.execute(
                    "SELECT id FROM turns WHERE namespace = ? AND scope = ? AND source = ? "
                    "AND message_id = ?", (self.namespace, scope, source, mid),
                ).fetchone()
                if row:
                    out[(scope, source, mid)] = int(row[0])
        return out

    def _lock_session(self, c: sqlite3.Connection, session: str) -> None:
        """Nothing to take: the write transaction (``BEGIN IMMEDIATE``) is the only
        writer, so the session's next place stays free until it commits."""

    def _window_rows(self, windows: Sequence[tuple[str, int, int]]) -> list[Turn]:
        """The turns at the places of ``windows`` (see :meth:`TurnRows.neighbour_turns`)."""
        # A join on the windows, so each one is an index range of its session (an OR of
        # them made SQLite scan every turn of the namespace).
        values = ", ".join(["(?, ?, ?)"] * len(windows))
        args: list[Any] = [v for w in windows for v in w]
        cols = ", ".join(f"t.{c.strip()}" for c in TURN_COLUMNS.split(","))
        sql = (f"SELECT DISTINCT {cols} FROM (VALUES {values}) AS w JOIN turns t "
               "ON t.namespace = ? AND t.session = w.column1 "
               "AND t.turn_index BETWEEN w.column2 AND w.column3")
        with self.db.read() as c:
            rows = c.execute(sql, (*args, self.namespace)).fetchall()
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
        expression = fts.expression(query, substrings=substrings)
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
        """Stored vectors of the given turns (looked up in each one's scope space), in
        the order of their ids; read once and kept while the change log names no new
        vector for them (:meth:`_fresh_turn_vectors`)."""
        # A recall asks for a hundred turns or more, nearly all of one scope: the space
        # name is made once per scope, not once per turn.
        by_scope: dict[str, list[int]] = {}
        for t in turns:
            by_scope.setdefault(t.scope, []).append(t.id)
        self._fresh_turn_vectors()
        out: dict[int, np.ndarray] = {}
        for scope, keys in by_scope.items():
            space = self.space("t", scope)
            cached, missing = self._turn_vecs.take((space, k) for k in keys)
            out.update((k, v) for (_, k), v in cached.items())
            if missing:
                found, matrix = SpaceSource(self.db, space, dim).vectors_for(
                    [k for _, k in missing])
                read = list(zip(found.tolist(), matrix, strict=True))
                out.update(read)
                self._turn_vecs.put(((space, k), v) for k, v in read)
        return {tid: out[tid] for tid in sorted(out)}

    def _fresh_turn_vectors(self) -> None:
        """Drop the cached turn vectors that the change log has replaced or deleted since
        the last look (a write of this process or another's, a ``reembed``). The log is
        read before any vector is, so a vector changed while it is read is dropped at
        the next look."""
        with self.db.read() as c:
            top = int(c.execute("SELECT coalesce(max(seq), 0) FROM vector_log").fetchone()[0])
            last = self._turn_vecs_seq
            if top == last:
                return
            if top < last or top - last > _VECTOR_LOG_READ:
                self._turn_vecs.clear()  # a replaced file, or too much to replay: start over
            else:
                changed = c.execute(
                    "SELECT space, key FROM vector_log WHERE seq > ? AND seq <= ?",
                    (last, top)).fetchall()
                self._turn_vecs.drop((str(space), int(key)) for space, key in changed)
        self._turn_vecs_seq = top

    # -- archive ------------------------------------------------------------------------

    def archive_snapshot(
        self, namespace: str | None
    ) -> contextlib.AbstractContextManager[SQLiteSnapshot]:
        """A read snapshot for the archive (see :mod:`.dump`)."""
        from tideline.store.sqlite import dump

        return dump.snapshot(self, namespace)

    def archive_loader(self, dim: int, expected: Mapping[str, int] | None = None,
                       ) -> contextlib.AbstractContextManager[SQLiteLoader]:
        """One write transaction that loads archived rows (see :mod:`.dump`; ``expected``,
        the rows per table, changes nothing here)."""
        from tideline.store.sqlite import dump

        del expected
        return dump.load(self, dim)
