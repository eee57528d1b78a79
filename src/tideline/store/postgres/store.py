"""The PostgreSQL implementation of the store: the same public API as
:class:`~tideline.store.sqlite.SQLiteStore`, over a server many hosts share.

SQLite has one writer at a time, so a read-check-write inside a transaction holds;
here writes run concurrently (READ COMMITTED), and the checks that must hold until
commit take a lock instead: an idempotency key read inside a write locks that key
(advisory), a session's next turn index locks that session (advisory), and memories
read inside a write are locked ``FOR NO KEY UPDATE`` (in id order, so two writers
never wait on each other in a circle). ``NO KEY``: a write never changes a memory's
id, and the weaker lock does not block the key-share lock a foreign key check takes,
so a writer linking a new memory to a row (an edge) does not queue behind another
writer potentiating that row. The row code both backends share is in
:class:`~tideline.store.namespace.NamespaceRows`; this module keeps what is PostgreSQL's
own (``tsvector``/``pg_trgm`` rows, pgvector columns, the locking reads).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tideline.models import Edge, MemoryRecord, Turn
from tideline.store.memories import best_live
from tideline.store.namespace import NamespaceRows
from tideline.store.postgres import lexical as pg_lexical
from tideline.store.postgres.connection import Database
from tideline.store.postgres.lock_keys import LOCK_KEY, advisory_key
from tideline.store.postgres.locks import SleepLocks
from tideline.store.postgres.pgvector import VectorParam
from tideline.store.postgres.search import HINT_SECONDS, LexicalSearch
from tideline.store.postgres.session import Conn
from tideline.store.postgres.turns import TurnRows
from tideline.store.rows import MEMORY_COLUMNS as _MEMORY_COLUMNS
from tideline.store.rows import (
    PENDING_FLAG,
    memory_from_row,
    memory_index_text,
    turn_index_text,
)

if TYPE_CHECKING:
    from tideline.embed.base import Embedder, Vectors
    from tideline.store.base import GatedWrite, VectorSearch
    from tideline.store.postgres.dump import PostgresLoader, PostgresSnapshot
    from tideline.store.postgres.vectors import PostgresVectorSpaces

__all__ = ["PostgresStore"]

_CHUNK = 1000
_KEY_READ = ("SELECT memory_id, decision, similarity, nearest FROM write_keys "
             "WHERE namespace = ? AND key = ? AND created_at >= ?")
# A row's namespace never changes, so a conflict (a re-index) rewrites only the text.
_INDEX_ROW = ("INSERT INTO {lex}(id, namespace, words, subs) VALUES (?, ?, ?::tsvector, ?) "
              "ON CONFLICT (id) DO UPDATE SET words = excluded.words, subs = excluded.subs")


class PostgresStore(LexicalSearch, TurnRows, NamespaceRows):
    """Rows of one namespace in one PostgreSQL database.

    Args:
        url: ``postgresql://…``.
        directory: this host's local state directory (caches, sleep state files, the
            hooks' journal); nothing authoritative lives there.
        namespace: which fully separate memory to use.
        marker: the embedder marker (``name:model/dim``) the caller will write with.
        retries: see :class:`~tideline.store.postgres.connection.Database`.
        lock_timeout_ms: see :class:`~tideline.store.postgres.connection.Database`.
        check_marker: refuse a store built with another embedder.
        pool_size: see :class:`~tideline.store.postgres.connection.Database`.
        read_url: see :class:`~tideline.store.postgres.connection.Database`.
        read_wait_ms: see :class:`~tideline.store.postgres.connection.Database`.

    Raises:
        EmbedderMismatch: the store was built with another embedder.
        BackendUnavailable: the server cannot be reached.
        SchemaTooNew: written by a newer Tideline.
    """

    backend = "postgresql"
    db: Database
    _tiebreak = ", id"
    _edge_order = " ORDER BY src, dst, type"
    _chunk = _CHUNK
    # Longer than SQLite's minute: a count here reads every matching row's heap page (13 ms
    # for a name in 6k of 100k rows), not a vocabulary row; the 1 % rule still applies.
    _df_cache_seconds = 300.0

    def __init__(
        self, url: str, directory: Path, namespace: str, marker: str, *, retries: int = 6,
        lock_timeout_ms: int = 5_000, check_marker: bool = True, pool_size: int = 4,
        read_url: str | None = None, read_wait_ms: int = 500,
    ) -> None:
        self.db = Database(url, directory, retries=retries, lock_timeout_ms=lock_timeout_ms,
                           pool_size=pool_size, read_url=read_url, read_wait_ms=read_wait_ms)
        self._df_caches: dict[str, tuple[int, float, dict[str, int]]] = {}
        self._alone_seen: dict[str, tuple[float, bool, float]] = {}  # see _alone
        self._hints = threading.local()
        self._seen: dict[str, tuple[float, str | None]] = {}
        self._seen_lock = threading.Lock()
        self._ids: str | None = None
        #: The highest memory id this process wrote (ids only grow: see
        #: ``PostgresVectorSpaces._size``).
        self.top_id = 0
        self.directory = directory
        self.namespace = namespace
        self.marker = marker
        self._sleep_locks = SleepLocks(self.db.url)  # the primary's URL
        if check_marker:
            self._check_marker(marker)

    def close(self) -> None:
        """Release this process's sleep locks and close the connection pool."""
        self._sleep_locks.close()
        self.db.close()

    def transaction(self) -> contextlib.AbstractContextManager[Conn]:
        """A short write transaction."""
        return self.db.write()

    def acquire_sleep_lock(self, holder: str) -> bool:
        """Take this namespace's sleep lock across every host: a session advisory lock
        on a connection of its own, so it dies with its holder.

        Returns:
            Whether ``holder`` holds it now.

        Raises:
            BackendUnavailable: the server cannot be reached.
        """
        return self._sleep_locks.acquire(self.namespace, holder)

    def release_sleep_lock(self, holder: str) -> None:
        """Drop the advisory sleep lock if ``holder`` holds it."""
        self._sleep_locks.release(self.namespace, holder)

    def backup(self, label: str, *, keep: int | None = None,
               max_bytes: int | None = None) -> Path | None:
        """No file copy: a PostgreSQL store is backed up by the server (``pg_dump``,
        base backups, WAL archiving), not by each host.

        Returns:
            None.
        """
        self.db.backup(label, keep=keep, max_bytes=max_bytes)
        return None

    def replication(self) -> dict[str, Any]:
        """Where writes and reads go, and what the read route did (see
        :mod:`tideline.store.postgres.replicas`): the write URL and the read URL
        (passwords hidden), whether read-only verbs use the read route, whether no
        primary answers now, and the read route's counters."""
        from tideline.store.postgres.urls import redact_url

        route = self.db.route
        out: dict[str, Any] = {"write_url": self.db.path, "read_url": None, "routed": False,
                               "read_only": self.db.read_only()}
        if route is not None:
            out.update(read_url=redact_url(route.endpoint.url), routed=route.routed,
                       **route.stats)
        return out

    def read_only(self) -> bool:
        """Whether no primary answers right now: reads come from a standby, writes
        raise :class:`~tideline.errors.PrimaryUnavailable` (see
        :mod:`tideline.store.postgres.replicas`)."""
        return self.db.read_only()

    def parallel_reads(self) -> bool:
        """True outside a transaction of this thread: another thread's reads take another
        pooled connection, so their round trips to the server overlap this thread's."""
        return not self.db.in_use()

    def statements_sent(self) -> int:
        """Statements sent through this store's pool so far (see
        :attr:`~tideline.store.postgres.connection.Database.statements`)."""
        return self.db.statements

    def describe(self) -> dict[str, Any]:
        """Where the data lives: backend, database (the URL without its password),
        schema version, size of the database on the server."""
        with self.db.read() as c:
            size = int(c.execute("SELECT pg_database_size(current_database())").fetchone()[0])
        return {"backend": self.backend, "database": self.db.path,
                "schema_version": self.db.schema_version(), "bytes": size}

    def doctor(
        self, embedder: Embedder, vectors: Any, *, repair: bool,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Check the derived data (index rows, vectors, times) and, with ``repair``,
        rebuild it (see :mod:`tideline.store.postgres.maintenance`)."""
        from tideline.store.postgres.maintenance import doctor
        from tideline.store.postgres.topology import check_topology

        out = doctor(self, embedder, vectors, repair=repair, progress=progress)
        # Where the URLs lead: a write URL at a standby, a read URL at the primary.
        out["replication"] = topology = check_topology(self.db)
        if topology["problems"]:
            out["problems"] = [*out["problems"], *topology["problems"]]
            out["ok"] = False
        return out

    def topology(self) -> dict[str, Any]:
        """What the write URL and the read URL reach (roles, standbys, synchronous
        settings) and what is misconfigured (see
        :func:`~tideline.store.postgres.topology.check_topology`)."""
        from tideline.store.postgres.topology import check_topology

        return check_topology(self.db)

    def reembed(
        self, new: Embedder, *, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Any]:
        """Re-embed every memory and turn of every namespace with ``new`` and switch the
        marker in one transaction.

        Raises:
            EmbedderError: the new embedder failed (the store is unchanged).
        """
        from tideline.store.postgres.maintenance import reembed

        return reembed(self, new, progress=progress)

    def vectors_pending(self) -> bool:
        """Whether some row may lack its vector: one ``db_meta`` read, or what this
        thread's gated write just read of it (:meth:`record_gated`, a second at most)."""
        seen = getattr(self._hints, "pending", None)
        if seen is not None:
            self._hints.pending = None
            if time.monotonic() - seen[0] < HINT_SECONDS:
                return bool(seen[1])
        return self.db.get_meta(PENDING_FLAG) == "1"

    def fill_pending(
        self, embed: Callable[[Sequence[str]], Vectors | None], *, limit: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Embed rows stored while the embedder was down, in batches, each in its own
        transaction (the portable fill of :func:`tideline.store.pending.fill`)."""
        from tideline.store import pending

        return pending.fill(self, embed, limit=limit, progress=progress)

    def vector_spaces(self, dim: int, marker: str) -> PostgresVectorSpaces:
        """The vector search of this store (pgvector HNSW, see :mod:`.vectors`)."""
        from tideline.store.postgres.vectors import PostgresVectorSpaces

        return PostgresVectorSpaces(self, dim, marker)

    # -- memories -------------------------------------------------------------------------

    def _hold_write_key(self, c: Conn, key: str) -> None:
        """An advisory lock on the key until commit, taken only inside a write."""
        if c.writing:
            c.lock(LOCK_KEY, self.namespace, key)

    def _index_memory(self, c: Conn, mid: int, rec: MemoryRecord, *,
                      namespace: str | None = None) -> None:
        """Write a memory's word and substring index row (``namespace``: the memory's,
        when it is not this store's — doctor's rebuild of every namespace)."""
        body = memory_index_text(rec)
        c.execute(_INDEX_ROW.format(lex="memories_lex"),
                  (mid, self.namespace if namespace is None else namespace,
                   pg_lexical.words_vector(body), pg_lexical.substring_text(body)))

    def _index_turn(self, c: Conn, tid: int, speaker: str, text: str, *,
                    namespace: str | None = None) -> None:
        """Write a turn's word and substring index row (see :meth:`_index_memory`)."""
        body = turn_index_text(speaker, text)
        c.execute(_INDEX_ROW.format(lex="turns_lex"),
                  (tid, self.namespace if namespace is None else namespace,
                   pg_lexical.words_vector(body), pg_lexical.substring_text(body)))

    def _put_vector(self, c: Conn, space: str, key: int, vector: np.ndarray) -> None:
        # The binary form the gated write and the searches send (exact float32s).
        c.execute(
            "INSERT INTO vectors(space, key, v) VALUES (?, ?, ?::vector) "
            "ON CONFLICT (space, key) DO UPDATE SET v = excluded.v",
            (space, key, VectorParam(vector)),
        )

    def record_gated(self, c: Conn, write: GatedWrite) -> int:
        """Store what the gate decided in one statement (see
        :mod:`tideline.store.postgres.writes`); returns the memory's id."""
        from tideline.store.postgres.writes import gated_statement

        sql, args = gated_statement(self.namespace, self.space("m", write.rec.scope),
                                    write)
        row = c.execute(sql, args).fetchone()
        self._hints.pending = (time.monotonic(), row[1] == "1")
        self.top_id = max(self.top_id, int(row[0]))
        return int(row[0])

    #: A gated write outside a transaction is one statement (:meth:`record_gated_at_once`).
    gated_at_once = True

    def gate_target(self, mid: int) -> tuple[MemoryRecord | None, Any]:
        """The memory the gate would potentiate, read as it is now without a lock, and a
        digest of its whole row (see :func:`~tideline.store.postgres.writes.at_once_statement`);
        ``(None, None)`` when the namespace holds no such memory."""
        from tideline.store.postgres.writes import TARGET_DIGEST

        held = getattr(self._hints, "target", None)
        self._hints.target = None
        if held is not None and held[0] == int(mid) and time.monotonic() - held[1] < HINT_SECONDS:
            return held[2], held[3]
        with self.db.read() as c:
            row = c.execute(f"SELECT {_MEMORY_COLUMNS}, {TARGET_DIGEST} FROM memories x "  # noqa: S608
                            "WHERE namespace = ? AND id = ?", (self.namespace, int(mid))).fetchone()
        if row is None:
            return None, None
        return memory_from_row(row[:-1]), bytes(row[-1])

    def remember_target(self, rec: MemoryRecord, digest: bytes) -> None:
        """Keep the gate's nearest live neighbour as its search read it (this thread's
        next :meth:`gate_target` of that id, within a second, answers with it: no read of
        its own). Only ever a first judgement: the write's statement checks the digest
        under the row's lock, and a row that moved is read again."""
        self._hints.target = (int(rec.id), time.monotonic(), rec, digest)

    def record_gated_at_once(
        self, write: GatedWrite, *, since: float | None, target: tuple[int, Any] | None,
    ) -> tuple[tuple[int, str, float, int | None] | None, int | None]:
        """Store what the gate decided as one statement outside a transaction (see
        :mod:`tideline.store.postgres.writes`): the key claimed, ``target`` (its id and
        :meth:`gate_target`'s digest) checked, the rows.

        Returns:
            (the key's stored outcome, None) for a replay; (None, the memory's id) when
            written; (None, None) when nothing was written because ``target`` changed.

        Raises:
            StoreBusy: a lock could not be had in time.
            StoreError: the database refused the write (nothing of it is stored).
        """
        from tideline.store.postgres.writes import at_once_statement

        sql, args = at_once_statement(
            self.namespace, self.space("m", write.rec.scope), write, since=since,
            target=target, lock=advisory_key(self.namespace, write.key), ids=self._id_sequence())
        with self.db.read() as c:
            row = c.execute(sql, args).fetchone()
            self._hints.pending = (time.monotonic(), row[1] == "1")
            if row[0] is not None:
                self.top_id = max(self.top_id, int(row[0]))
                return None, int(row[0])
            if not row[2]:
                return None, None
            # The claim met a stored outcome: a statement of its own sees it now.
            seen = c.execute(_KEY_READ, (self.namespace, write.key,
                                         float("-inf") if since is None else since)).fetchone()
        if seen is None:  # gone again meanwhile (its memory deleted): judge once more
            return None, None
        return (int(seen[0]), str(seen[1]), float(seen[2]), seen[3]), None

    def _id_sequence(self) -> str:
        """The sequence of ``memories.id`` (its identity), read once per store."""
        if self._ids is None:
            with self.db.read() as c:
                self._ids = str(c.execute(
                    "SELECT pg_get_serial_sequence('memories', 'id')").fetchone()[0])
        return self._ids

    def nearest_live(self, vectors: VectorSearch, scope: str, vector: np.ndarray,
                     k: int) -> tuple[int | None, float]:
        """The gate's neighbour (see :meth:`MemoryRows.nearest_live`), the search and the
        neighbours' status in one statement when ``vectors`` is this store's pgvector
        search."""
        from tideline.store.postgres.vectors import PostgresVectorSpaces

        if not isinstance(vectors, PostgresVectorSpaces) or vectors.store is not self:
            return super().nearest_live(vectors, scope, vector, k)
        return best_live(vectors.gate_neighbours(self.namespace, scope, vector, k))

    key_with_gate = True  # a round trip to the server costs more than a local read

    def keyed_nearest_live(
        self, vectors: VectorSearch, scope: str, vector: np.ndarray, k: int, key: str, *,
        since: float | None = None,
    ) -> tuple[tuple[int, str, float, int | None] | None, tuple[int | None, float]]:
        """The key's stored outcome and the gate's neighbour (see
        :meth:`MemoryRows.keyed_nearest_live`) in one statement when ``vectors`` is this
        store's pgvector search."""
        from tideline.store.postgres.vectors import PostgresVectorSpaces

        found = None
        if isinstance(vectors, PostgresVectorSpaces) and vectors.store is self:
            found = vectors.keyed_gate_neighbours(self.namespace, scope, vector, k, key, since)
        if found is None:
            return super().keyed_nearest_live(vectors, scope, vector, k, key, since=since)
        seen, rows = found
        return seen, ((None, 0.0) if seen is not None else best_live(rows))

    def commit_reads(
        self, c: Conn, key: str, *, since: float | None, lock: Sequence[int],
    ) -> tuple[tuple[int, str, float, int | None] | None, dict[int, MemoryRecord]]:
        """The key's re-check (its advisory lock first) and the lock of the memories
        ``lock`` sent together: one round trip in the write's pipeline (see
        :meth:`MemoryRows.commit_reads`). The memories are locked even when the key
        turns out seen; the transaction is about to end then."""
        self._hold_write_key(c, key)
        keyed = c.execute(_KEY_READ, (self.namespace, key,
                                      float("-inf") if since is None else since))
        wanted = sorted({int(i) for i in lock})
        locked = c.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE "  # noqa: S608
                           "namespace = ? AND id = ANY(?) ORDER BY id FOR NO KEY UPDATE",
                           (self.namespace, wanted)) if wanted else None
        row = keyed.fetchone()
        records = [memory_from_row(r) for r in locked.fetchall()] if locked is not None else []
        if row is not None:
            return (int(row[0]), str(row[1]), float(row[2]), row[3]), {}
        return None, {rec.id: rec for rec in records}

    def bulk_load(self, expected: int = 0) -> contextlib.AbstractContextManager[Conn]:
        """One transaction for a large load of about ``expected`` rows (see
        :mod:`tideline.store.postgres.bulk`): ``COPY``, and the derived indexes of tables
        holding fewer rows than that built once at the end."""
        return self._bulk(expected)

    @contextlib.contextmanager
    def _bulk(self, expected: int) -> Iterator[Conn]:
        from tideline.store.postgres.bulk import deferred_indexes

        with self.db.bulk() as c, deferred_indexes(c, expected):
            yield c

    def insert_memories(self, c: Conn, recs: Sequence[MemoryRecord],
                        vectors: Sequence[np.ndarray | None]) -> list[int]:
        """Insert many memories with ``COPY`` (inside :meth:`bulk_load`; in an ordinary
        write transaction one at a time); returns their new ids in order."""
        if c.pipeline is not None:
            return [self.insert_memory(c, r, v) for r, v in zip(recs, vectors, strict=True)]
        from tideline.store.postgres.bulk import insert_memories

        return insert_memories(c, self.namespace, self.space, recs, vectors)

    def _drop_vector(self, c: Conn, space: str, key: int) -> None:
        c.execute("DELETE FROM vectors WHERE space = ? AND key = ?", (space, key))

    def _unindex_memory(self, c: Conn, mid: int) -> None:
        """Nothing: the ``memories_lex`` row goes with its memory (ON DELETE CASCADE)."""

    def get_memories(self, ids: Iterable[int], c: Conn | None = None) -> dict[int, MemoryRecord]:
        """Memories by id (missing ids are left out); locked ``FOR NO KEY UPDATE`` in a write."""
        wanted = sorted(dict.fromkeys(int(i) for i in ids))
        out: dict[int, MemoryRecord] = {}
        if not wanted:
            return out
        with contextlib.ExitStack() as stack:
            conn = c if c is not None else stack.enter_context(self.db.read())
            lock = " ORDER BY id FOR NO KEY UPDATE" if conn.writing else ""
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start:start + _CHUNK]
                rows = conn.execute(
                    f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE namespace = ? "  # noqa: S608
                    f"AND id = ANY(?){lock}", (self.namespace, chunk)).fetchall()
                for row in rows:
                    rec = memory_from_row(row)
                    out[rec.id] = rec
        return out

    def memory_vectors(self, recs: Sequence[MemoryRecord], dim: int) -> dict[int, np.ndarray]:
        """Stored vectors of the given memories (looked up in each one's scope space)."""
        return self._vectors_of([(self.space("m", r.scope), r.id) for r in recs], dim)

    def turn_vectors(self, turns: Sequence[Turn], dim: int) -> dict[int, np.ndarray]:
        """Stored vectors of the given turns (looked up in each one's scope space)."""
        return self._vectors_of([(self.space("t", t.scope), t.id) for t in turns], dim)

    def memory_vectors_in(self, ids: Sequence[int], scopes: Sequence[str],
                          dim: int) -> dict[tuple[str, int], np.ndarray]:
        """(scope, memory id) → stored vector, every scope's space in one statement."""
        spaces = {self.space("m", scope): scope for scope in scopes}
        out: dict[tuple[str, int], np.ndarray] = {}
        if not ids or not spaces:
            return out
        with self.db.read() as c:
            rows = c.execute("SELECT space, key, v FROM vectors WHERE space = ANY(?) "
                             "AND key = ANY(?)", (list(spaces), [int(i) for i in ids])).fetchall()
        for space, key, blob in rows:
            vec = np.frombuffer(bytes(blob), dtype=np.float32)
            if vec.shape[0] == dim:
                out[(spaces[str(space)], int(key))] = vec
        return out

    def recall_rows(
        self, ids: Sequence[int], edge_types: Sequence[str], lexical_only: Sequence[int],
        scopes: Sequence[str], dim: int,
    ) -> tuple[dict[int, MemoryRecord], list[Edge], dict[tuple[str, int], np.ndarray]]:
        """The records of a recall's memory candidates, the edges touching them and the
        vectors of the lexical-only ones, in one statement (see
        :func:`tideline.store.postgres.recall.candidate_rows`)."""
        from tideline.store.postgres.recall import candidate_rows

        return candidate_rows(self, ids, edge_types, lexical_only, scopes, dim)

    def record_recall(self, data: dict[str, Any], hits: Sequence[tuple[int, float, float]],
                      tier: str, now: float) -> int:
        """Journal one recall in one round trip (see
        :func:`tideline.store.postgres.recall.record_recall`); returns the event's id."""
        from tideline.store.postgres.recall import record_recall

        return record_recall(self, data, hits, tier, now)

    def _vectors_of(self, pairs: Sequence[tuple[str, int]], dim: int) -> dict[int, np.ndarray]:
        by_space: dict[str, list[int]] = {}
        for space, key in pairs:
            by_space.setdefault(space, []).append(int(key))
        out: dict[int, np.ndarray] = {}
        with self.db.read() as c:
            for space, keys in by_space.items():
                rows = c.execute("SELECT key, v FROM vectors WHERE space = ? AND key = ANY(?)",
                                 (space, keys)).fetchall()
                for key, blob in rows:
                    vec = np.frombuffer(bytes(blob), dtype=np.float32)
                    if vec.shape[0] == dim:
                        out[int(key)] = vec
        return out

    # -- archive --------------------------------------------------------------------------

    def archive_snapshot(
        self, namespace: str | None
    ) -> contextlib.AbstractContextManager[PostgresSnapshot]:
        """A read snapshot for the archive (see :mod:`tideline.store.postgres.dump`)."""
        from tideline.store.postgres import dump

        return dump.snapshot(self, namespace)

    def archive_loader(self, dim: int, expected: Mapping[str, int] | None = None,
                       ) -> contextlib.AbstractContextManager[PostgresLoader]:
        """One bulk transaction that loads archived rows (``expected``: rows per table)."""
        from tideline.store.postgres import dump

        return dump.load(self, dim, expected)
