"""The PostgreSQL implementation of the store: the same public API as
:class:`~tideline.store.sqlite.SQLiteStore`, over a server many hosts share.

SQLite has one writer at a time, so a read-check-write inside a transaction holds;
here writes run concurrently (READ COMMITTED), and the checks that must hold until
commit take a lock instead: an idempotency key read inside a write locks that key
(advisory), a session's next turn index locks that session (advisory), and memories
read inside a write are locked ``FOR UPDATE`` (in id order, so two writers never
wait on each other in a circle).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tideline.errors import EmbedderMismatch, NotFound
from tideline.models import Edge, LexicalQuery, MemoryRecord, Turn
from tideline.store.events import append_event
from tideline.store.postgres import lexical as pg_lexical
from tideline.store.postgres.connection import LOCK_KEY, Conn, Database
from tideline.store.postgres.locks import SleepLocks
from tideline.store.postgres.turns import TurnRows, mark_pending
from tideline.store.rows import MEMORY_COLUMNS as _MEMORY_COLUMNS
from tideline.store.rows import (
    PENDING_FLAG,
    memory_from_row,
    memory_index_text,
    turn_index_text,
)
from tideline.store.rows import json_list as _j

if TYPE_CHECKING:
    from tideline.embed.base import Embedder, Vectors
    from tideline.store.agent import AgentReader
    from tideline.store.postgres.dump import PostgresLoader, PostgresSnapshot
    from tideline.store.postgres.vectors import PostgresVectorSpaces

__all__ = ["PostgresStore"]

_DF_CACHE_MIN = 500
_DF_CACHE_SIZE = 20_000
# Longer than SQLite's minute: a count here reads every matching row's heap page (13 ms
# for a name in 6k of 100k rows), not a vocabulary row; the 1 % rule still applies.
_DF_CACHE_SECONDS = 300.0
_CHUNK = 1000


def vector_text(vector: np.ndarray) -> str:
    """pgvector's text form of a float32 vector (exact: float32 values print exactly)."""
    arr = np.ascontiguousarray(vector, dtype=np.float32).ravel()
    return "[" + ",".join(repr(float(x)) for x in arr.tolist()) + "]"


class PostgresStore(TurnRows):
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

    Raises:
        EmbedderMismatch: the store was built with another embedder.
        BackendUnavailable: the server cannot be reached.
        SchemaTooNew: written by a newer Tideline.
    """

    backend = "postgresql"

    def __init__(
        self, url: str, directory: Path, namespace: str, marker: str, *, retries: int = 6,
        lock_timeout_ms: int = 5_000, check_marker: bool = True,
    ) -> None:
        self.db = Database(url, directory, retries=retries, lock_timeout_ms=lock_timeout_ms)
        self._df_caches: dict[str, tuple[int, float, dict[str, int]]] = {}
        self.directory = directory
        self.namespace = namespace
        self.marker = marker
        self.sleep_lock = SleepLocks(url)
        if check_marker:
            self._check_marker(marker)

    def _check_marker(self, marker: str) -> None:
        stored = self.db.get_meta("embedder")
        if stored is None:
            with self.db.write() as c:
                c.execute("INSERT INTO db_meta(key, value) VALUES ('embedder', ?) "
                          "ON CONFLICT (key) DO NOTHING", (marker,))
            stored = self.db.get_meta("embedder")
        if stored != marker:
            raise EmbedderMismatch(str(stored), marker)

    def close(self) -> None:
        """Release this process's sleep locks and close the connection pool."""
        self.sleep_lock.close()
        self.db.close()

    def transaction(self) -> contextlib.AbstractContextManager[Conn]:
        """A short write transaction."""
        return self.db.write()

    def backup(self, label: str, *, keep: int | None = None,
               max_bytes: int | None = None) -> Path | None:
        """No file copy: a PostgreSQL store is backed up by the server (``pg_dump``,
        base backups, WAL archiving), not by each host.

        Returns:
            None.
        """
        self.db.backup(label, keep=keep, max_bytes=max_bytes)
        return None

    def describe(self) -> dict[str, Any]:
        """Where the data lives: backend, database (the URL without its password),
        schema version, size of the database on the server."""
        with self.db.read() as c:
            size = int(c.execute("SELECT pg_database_size(current_database())").fetchone()[0])
        return {"backend": self.backend, "database": self.db.path,
                "schema_version": self.db.schema_version(), "bytes": size}

    @property
    def agent(self) -> AgentReader:
        """The reads (and small writes) of injection, hooks and importers in this namespace."""
        from tideline.store.agent import AgentReader

        return AgentReader(self.db, self.namespace)

    def doctor(
        self, embedder: Embedder, vectors: Any, *, repair: bool,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Check the derived data (index rows, vectors, times) and, with ``repair``,
        rebuild it (see :mod:`tideline.store.postgres.maintenance`)."""
        from tideline.store.postgres.maintenance import doctor

        return doctor(self, embedder, vectors, repair=repair, progress=progress)

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
        """Whether some row may lack its vector (one ``db_meta`` read)."""
        return self.db.get_meta(PENDING_FLAG) == "1"

    def fill_pending(
        self, embed: Callable[[Sequence[str]], Vectors | None], *, limit: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Embed rows stored while the embedder was down, in batches, each in its own
        transaction (the portable fill of :func:`tideline.store.sqlite.pending.fill`)."""
        from tideline.store.sqlite import pending

        return pending.fill(cast(Any, self), embed, limit=limit, progress=progress)

    def space(self, kind: str, scope: str) -> str:
        """Name of the vector space for memories (``m``) or turns (``t``) of one scope."""
        return f"{kind}:{self.namespace}:{scope}"

    def vector_spaces(self, dim: int, marker: str) -> PostgresVectorSpaces:
        """The vector search of this store (pgvector HNSW, see :mod:`.vectors`)."""
        from tideline.store.postgres.vectors import PostgresVectorSpaces

        return PostgresVectorSpaces(self, dim, marker)

    # -- memories -------------------------------------------------------------------------

    def write_key(self, key: str, *,
                  since: float | None = None) -> tuple[int, str, float, int | None] | None:
        """The stored outcome of an idempotency key, if it was seen (at or after ``since``).

        Read inside a write transaction, the key is locked until commit, so two writers
        of one key never both find it unseen.
        """
        with self.db.read() as c:
            if c.writing:
                c.lock(LOCK_KEY, self.namespace, key)
            row = c.execute(
                "SELECT memory_id, decision, similarity, nearest FROM write_keys "
                "WHERE namespace = ? AND key = ? AND created_at >= ?",
                (self.namespace, key, float("-inf") if since is None else since),
            ).fetchone()
        if row is None:
            return None
        return int(row[0]), str(row[1]), float(row[2]), row[3]

    def insert_memory(self, c: Conn, rec: MemoryRecord, vector: np.ndarray | None) -> int:
        """Insert a memory with its index rows inside the caller's transaction."""
        row = c.execute(
            "INSERT INTO memories(namespace, scope, kind, gesture, context, cognition_direction, "
            "tags, entities_role, related_entities, source_links, importance, emotional, "
            "recurrence, unresolved, weight, strength, stability, reinforcements, last_access, "
            "status, version, supersedes, event_time, recorded_at, updated_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
            (
                self.namespace, rec.scope, rec.kind, rec.gesture, rec.context,
                rec.cognition_direction, _j(rec.tags), rec.entities_role,
                _j(rec.related_entities), _j(rec.source_links), rec.importance, rec.emotional,
                rec.recurrence, rec.unresolved, rec.weight, rec.strength, rec.stability,
                rec.reinforcements, rec.last_access, rec.status, rec.version, rec.supersedes,
                rec.event_time, rec.recorded_at, rec.updated_at,
            ),
        ).fetchone()
        mid = int(row[0])
        self._index_memory(c, mid, rec)
        if vector is not None:
            self._put_vector(c, self.space("m", rec.scope), mid, vector)
        else:
            mark_pending(c)
        return mid

    def _index_memory(self, c: Conn, mid: int, rec: MemoryRecord) -> None:
        body = memory_index_text(rec)
        c.execute(
            "INSERT INTO memories_lex(id, words, subs) VALUES (?, ?::tsvector, ?) "
            "ON CONFLICT (id) DO UPDATE SET words = excluded.words, subs = excluded.subs",
            (mid, pg_lexical.words_vector(body), pg_lexical.substring_text(body)),
        )

    def _index_turn(self, c: Conn, tid: int, speaker: str, text: str) -> None:
        body = turn_index_text(speaker, text)
        c.execute(
            "INSERT INTO turns_lex(id, words, subs) VALUES (?, ?::tsvector, ?) "
            "ON CONFLICT (id) DO UPDATE SET words = excluded.words, subs = excluded.subs",
            (tid, pg_lexical.words_vector(body), pg_lexical.substring_text(body)),
        )

    def _put_vector(self, c: Conn, space: str, key: int, vector: np.ndarray) -> None:
        arr = np.ascontiguousarray(vector, dtype=np.float32).ravel()
        c.execute(
            "INSERT INTO vectors(space, key, v, emb) VALUES (?, ?, ?, ?::vector) "
            "ON CONFLICT (space, key) DO UPDATE SET v = excluded.v, emb = excluded.emb",
            (space, key, arr.tobytes(), vector_text(arr)),
        )

    def _drop_vector(self, c: Conn, space: str, key: int) -> None:
        c.execute("DELETE FROM vectors WHERE space = ? AND key = ?", (space, key))

    def update_memory(self, c: Conn, rec: MemoryRecord) -> None:
        """Write back every mutable field of ``rec`` (same id) and refresh its index rows."""
        c.execute(
            "UPDATE memories SET kind=?, gesture=?, context=?, cognition_direction=?, tags=?, "
            "entities_role=?, related_entities=?, source_links=?, importance=?, emotional=?, "
            "recurrence=?, unresolved=?, weight=?, strength=?, stability=?, reinforcements=?, "
            "last_access=?, status=?, version=?, event_time=?, updated_at=? "
            "WHERE id = ? AND namespace = ?",
            (
                rec.kind, rec.gesture, rec.context, rec.cognition_direction, _j(rec.tags),
                rec.entities_role, _j(rec.related_entities), _j(rec.source_links),
                rec.importance, rec.emotional, rec.recurrence, rec.unresolved, rec.weight,
                rec.strength, rec.stability, rec.reinforcements, rec.last_access, rec.status,
                rec.version, rec.event_time, rec.updated_at, rec.id, self.namespace,
            ),
        )
        self._index_memory(c, rec.id, rec)

    def set_status(self, c: Conn, mid: int, status: str, now: float) -> None:
        """Change a memory's status (e.g. to ``superseded``) and bump its version."""
        c.execute(
            "UPDATE memories SET status = ?, version = version + 1, updated_at = ? "
            "WHERE id = ? AND namespace = ?",
            (status, now, mid, self.namespace),
        )

    def record_write_key(
        self, c: Conn, key: str, mid: int, decision: str, similarity: float,
        nearest: int | None, now: float, *, refresh: bool = False,
    ) -> None:
        """Remember the outcome of an idempotency key (``refresh``: replace an older one)."""
        action = ("DO UPDATE SET memory_id = excluded.memory_id, decision = excluded.decision, "
                  "similarity = excluded.similarity, nearest = excluded.nearest, "
                  "created_at = excluded.created_at") if refresh else "DO NOTHING"
        c.execute(
            "INSERT INTO write_keys(namespace, key, memory_id, decision, similarity, "  # noqa: S608
            f"nearest, created_at) VALUES (?,?,?,?,?,?,?) ON CONFLICT (namespace, key) {action}",
            (self.namespace, key, mid, decision, similarity, nearest, now),
        )

    def delete_memory(self, c: Conn, mid: int) -> MemoryRecord:
        """Really delete a memory: row, index rows, vector, edges, idempotency keys.

        Raises:
            NotFound: no such memory in this namespace.
        """
        rec = self.get_memory(mid, c)
        self._drop_vector(c, self.space("m", rec.scope), mid)
        for table in ("write_keys", "attention_log", "eligibility"):
            c.execute(f"DELETE FROM {table} WHERE namespace = ? AND memory_id = ?",  # noqa: S608
                      (self.namespace, mid))
        c.execute("DELETE FROM memories WHERE id = ? AND namespace = ?", (mid, self.namespace))
        return rec

    def get_memory(self, mid: int, c: Conn | None = None) -> MemoryRecord:
        """One memory by id.

        Raises:
            NotFound: no such memory in this namespace.
        """
        found = self.get_memories([mid], c)
        if mid not in found:
            raise NotFound(f"no memory with id {mid}")
        return found[mid]

    def get_memories(self, ids: Iterable[int], c: Conn | None = None) -> dict[int, MemoryRecord]:
        """Memories by id (missing ids are left out); locked ``FOR UPDATE`` in a write."""
        wanted = sorted(dict.fromkeys(int(i) for i in ids))
        out: dict[int, MemoryRecord] = {}
        if not wanted:
            return out
        with contextlib.ExitStack() as stack:
            conn = c if c is not None else stack.enter_context(self.db.read())
            lock = " ORDER BY id FOR UPDATE" if conn.writing else ""
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start:start + _CHUNK]
                rows = conn.execute(
                    f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE namespace = ? "  # noqa: S608
                    f"AND id = ANY(?){lock}", (self.namespace, chunk)).fetchall()
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
            where.append("status = ANY(?)")
            args.append(list(status))
        if min_weight is not None:
            where.append("weight > ?")
            args.append(min_weight)
        if order not in ("recorded_at DESC", "weight DESC", "id ASC", "last_access DESC"):
            order = "recorded_at DESC"
        sql = (f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE {' AND '.join(where)} "  # noqa: S608
               f"ORDER BY {order}, id LIMIT ?")
        with self.db.read() as c:
            rows = c.execute(sql, (*args, limit)).fetchall()
        return [memory_from_row(r) for r in rows]

    def _filters(
        self, *, scopes: Sequence[str] | None, kind: str | None = None, alias: str = "",
        since: float | None = None, until: float | None = None,
    ) -> tuple[list[str], list[Any]]:
        p = f"{alias}." if alias else ""
        where = [f"{p}namespace = ?"]
        args: list[Any] = [self.namespace]
        if scopes is not None:
            where.append(f"{p}scope = ANY(?)")
            args.append(list(scopes))
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
        return self._vectors_of([(self.space("m", r.scope), r.id) for r in recs], dim)

    def turn_vectors(self, turns: Sequence[Turn], dim: int) -> dict[int, np.ndarray]:
        """Stored vectors of the given turns (looked up in each one's scope space)."""
        return self._vectors_of([(self.space("t", t.scope), t.id) for t in turns], dim)

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

    # -- lexical search -------------------------------------------------------------------

    def search_memories(
        self, query: LexicalQuery, *, substrings: bool, scopes: Sequence[str], limit: int,
        kind: str | None = None, since: float | None = None, until: float | None = None,
        include_superseded: bool = False,
    ) -> list[tuple[int, float]]:
        """(memory id, score) best first: the word index, or with ``substrings`` the
        identifier/substring index (see :mod:`tideline.store.postgres.lexical`)."""
        search = pg_lexical.plan(query, substrings=substrings)
        return self._search_memories(search, scopes=scopes, limit=limit, kind=kind,
                                     since=since, until=until,
                                     include_superseded=include_superseded)

    def search_turns(
        self, query: LexicalQuery, *, substrings: bool, scopes: Sequence[str], limit: int,
        since: float | None = None, until: float | None = None,
    ) -> list[tuple[int, float]]:
        """(turn id, score) best first on the word or the substring index of raw turns."""
        search = pg_lexical.plan(query, substrings=substrings)
        return self._search_turns(search, scopes=scopes, limit=limit, since=since, until=until)

    @staticmethod
    def _match(search: pg_lexical.Search) -> tuple[str, str, list[Any]]:
        """(score expression, condition, their parameters in order) over ``l``."""
        if search.tsquery is not None:
            return ("ts_rank(l.words, ?::tsquery)", "l.words @@ ?::tsquery",
                    [search.tsquery, search.tsquery])
        likes = " + ".join(["(CASE WHEN l.subs LIKE ? THEN 1 ELSE 0 END)"] * len(search.patterns))
        cond = " OR ".join(["l.subs LIKE ?"] * len(search.patterns))
        return f"({likes})", f"({cond})", [*search.patterns, *search.patterns]

    @classmethod
    def _ranked(cls, search: pg_lexical.Search, lex: str, rows: str, where: list[str]) -> str:
        """The matches of ``lex`` best first, each kept if its row of ``rows`` (alias
        ``x``) passes ``where``; parameters: the match's, then the filter's, then the limit.

        The lexical tables hold no namespace or scope, so the matches come from the word
        or trigram index alone, are ranked there (their number is bounded by the engine's
        posting budget), and only then is each looked up by primary key, best first,
        until ``limit`` pass. The ``LIMIT 1`` keeps the lookup a nested-loop probe: joined
        plainly, the planner hashed the whole namespace's rows (a sequential scan of
        every memory) for each search.
        """
        score, cond, _ = cls._match(search)
        return (f"SELECT h.id, h.r FROM (SELECT l.id, {score} AS r FROM {lex} l "  # noqa: S608
                f"WHERE {cond} ORDER BY r DESC, l.id DESC) AS h CROSS JOIN LATERAL "
                f"(SELECT 1 FROM {rows} x WHERE x.id = h.id AND {' AND '.join(where)} "
                "LIMIT 1) AS kept ORDER BY h.r DESC, h.id DESC LIMIT ?")

    def _search_memories(self, search: pg_lexical.Search, *, scopes: Sequence[str], limit: int,
                         kind: str | None, since: float | None, until: float | None,
                         include_superseded: bool) -> list[tuple[int, float]]:
        if search.empty or not scopes:
            return []
        margs = self._match(search)[2]
        where, args = self._filters(scopes=scopes, kind=kind, alias="x", since=since,
                                    until=until)
        if not include_superseded:
            where.append("x.status != 'superseded'")
        sql = self._ranked(search, "memories_lex", "memories", where)
        with self.db.read() as c:
            rows = c.execute(sql, (*margs, *args, limit)).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def _search_turns(self, search: pg_lexical.Search, *, scopes: Sequence[str], limit: int,
                      since: float | None, until: float | None) -> list[tuple[int, float]]:
        if search.empty or not scopes:
            return []
        margs = self._match(search)[2]
        where = ["x.namespace = ?", "x.scope = ANY(?)"]
        args: list[Any] = [self.namespace, list(scopes)]
        if since is not None:
            where.append("coalesce(x.ts, x.recorded_at) >= ?")
            args.append(since)
        if until is not None:
            where.append("coalesce(x.ts, x.recorded_at) <= ?")
            args.append(until)
        sql = self._ranked(search, "turns_lex", "turns", where)
        with self.db.read() as c:
            rows = c.execute(sql, (*margs, *args, limit)).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def document_frequencies(self, kind: str, tokens: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many rows of memories (``m``) or turns (``t``) hold each index token.

        Large counts are cached per process as on SQLite (dropped when the row count
        moved by over 1 % or after five minutes).

        Returns:
            Document frequency per token (missing tokens are 0) and the highest row id
            as an estimate of the row count.
        """
        lex, table = ("memories_lex", "memories") if kind == "m" else ("turns_lex", "turns")
        wanted = list(dict.fromkeys(tokens))
        lexemes: dict[str, str | None] = {}
        for token in wanted:
            words = pg_lexical.tokens(token)
            lexemes[token] = pg_lexical._lexeme(words[0]) if len(words) == 1 else None
        # One statement counts every token the cache lacks and reads the row count (one
        # round trip per token was most of this call's time); the cache is checked
        # against that count after, and counted again only when it went stale.
        guess = self._df_caches.get(kind)
        known = guess[2] if guess is not None else {}
        total, counted = self._count_tokens(
            lex, table, {t: q for t in wanted if t not in known and (q := lexemes[t])})
        cache = self._df_cache_for(kind, total)
        if cache is not known:
            stale = {t: q for t in wanted if t in known and t not in counted
                     and (q := lexemes[t])}
            if stale:
                counted |= self._count_tokens(lex, table, stale)[1]
        out: dict[str, int] = {}
        for token in wanted:
            hit = cache.get(token)
            if hit is None:
                hit = counted.get(token, 0)
                if hit >= _DF_CACHE_MIN and len(cache) < _DF_CACHE_SIZE:
                    cache[token] = hit
            out[token] = hit
        return out, total

    def _count_tokens(self, lex: str, table: str,
                      queries: dict[str, str]) -> tuple[int, dict[str, int]]:
        """The highest row id of ``table`` and the rows of ``lex`` holding each token
        (``queries``: token → its one-lexeme ``tsquery``), in one statement."""
        sql = (f"SELECT top.n, c.token, c.hits FROM (SELECT coalesce(max(id), 0) AS n "  # noqa: S608
               f"FROM {table}) AS top LEFT JOIN LATERAL (SELECT q.token, (SELECT count(*) "
               f"FROM {lex} WHERE words @@ q.lexeme::tsquery) AS hits FROM "
               "unnest(?::text[], ?::text[]) AS q(token, lexeme)) AS c ON true")
        with self.db.read() as c:
            rows = c.execute(sql, (list(queries), list(queries.values()))).fetchall()
        total = int(rows[0][0]) if rows else 0
        return total, {str(r[1]): int(r[2]) for r in rows if r[1] is not None}

    def _df_cache_for(self, kind: str, total: int) -> dict[str, int]:
        now = time.monotonic()
        cached = self._df_caches.get(kind)
        if (cached is None or now - cached[1] > _DF_CACHE_SECONDS
                or abs(total - cached[0]) > 0.01 * max(cached[0], 1)):
            cached = (total, now, {})
            self._df_caches[kind] = cached
        return cached[2]

    # -- edges ----------------------------------------------------------------------------

    def add_edge(self, c: Conn, src: int, dst: int, etype: str, weight: float,
                 now: float) -> None:
        """Create or strengthen a typed edge (weights add up, capped at 1)."""
        c.execute(
            "INSERT INTO edges(src, dst, type, weight, created_at, updated_at) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT(src, dst, type) DO UPDATE SET "
            "weight = least(1.0, edges.weight + excluded.weight), "
            "updated_at = excluded.updated_at",
            (src, dst, etype, weight, now, now),
        )

    def copy_edges(self, c: Conn, old: int, new: int, types: Sequence[str], now: float) -> None:
        """Give a new version the associative edges of the version it supersedes."""
        kinds = list(types)
        c.execute(
            "INSERT INTO edges(src, dst, type, weight, created_at, updated_at) "
            "SELECT ?, dst, type, weight, ?, ? FROM edges WHERE src = ? AND dst != ? "
            "AND type = ANY(?) ON CONFLICT DO NOTHING", (new, now, now, old, new, kinds),
        )
        c.execute(
            "INSERT INTO edges(src, dst, type, weight, created_at, updated_at) "
            "SELECT src, ?, type, weight, ?, ? FROM edges WHERE dst = ? AND src != ? "
            "AND type = ANY(?) ON CONFLICT DO NOTHING", (new, now, now, old, new, kinds),
        )

    def edges_of(self, ids: Sequence[int], types: Sequence[str] | None = None) -> list[Edge]:
        """Edges touching any of ``ids`` (both directions)."""
        if not ids:
            return []
        idl = [int(i) for i in ids][:_CHUNK]
        sql = "SELECT src, dst, type, weight FROM edges WHERE (src = ANY(?) OR dst = ANY(?))"
        args: list[Any] = [idl, idl]
        if types:
            sql += " AND type = ANY(?)"
            args.append(list(types))
        with self.db.read() as c:
            rows = c.execute(sql + " ORDER BY src, dst, type", args).fetchall()
        return [Edge(int(a), int(b), str(t), float(w)) for a, b, t, w in rows]

    # -- turns, journal, scopes, stats, archive -------------------------------------------

    def log_event(self, c: Conn | None, kind: str, data: dict[str, Any],
                  memory_id: int | None = None, now: float | None = None) -> int:
        """Append one event to the journal (inside ``c`` if given, else its own
        transaction); returns its id (see :func:`tideline.store.events.append_event`)."""
        if c is not None:
            return append_event(c, self.namespace, kind, data, memory_id=memory_id, now=now)
        with self.db.write() as conn:
            return append_event(conn, self.namespace, kind, data, memory_id=memory_id, now=now)

    def events(self, *, kinds: Sequence[str] | None = None, limit: int = 50,
               since: float | None = None) -> list[dict[str, Any]]:
        """Journal entries, newest first."""
        sql = "SELECT id, ts, kind, memory_id, data FROM events WHERE namespace = ?"
        args: list[Any] = [self.namespace]
        if kinds:
            sql += " AND kind = ANY(?)"
            args.append(list(kinds))
        if since is not None:
            sql += " AND ts >= ?"
            args.append(since)
        sql += " ORDER BY id DESC LIMIT ?"
        with self.db.read() as c:
            rows = c.execute(sql, (*args, limit)).fetchall()
        return [{"id": r[0], "ts": r[1], "kind": r[2], "memory_id": r[3],
                 "data": json.loads(r[4])} for r in rows]

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
            def one(sql: str) -> int:
                return int(c.execute(sql, (ns,)).fetchone()[0])

            def grouped(col: str) -> dict[str, int]:
                rows = c.execute(
                    f"SELECT {col}, count(*) FROM memories WHERE namespace = ? GROUP BY {col}",  # noqa: S608
                    (ns,)).fetchall()
                return {str(k): int(v) for k, v in rows}

            return {
                "memories": one("SELECT count(*) FROM memories WHERE namespace = ?"),
                "by_kind": grouped("kind"),
                "by_scope": grouped("scope"),
                "by_status": grouped("status"),
                "turns": one("SELECT count(*) FROM turns WHERE namespace = ?"),
                "sessions": one("SELECT count(DISTINCT session) FROM turns WHERE namespace = ?"),
                "edges": {str(k): int(v) for k, v in c.execute(
                    "SELECT e.type, count(*) FROM edges e JOIN memories m ON m.id = e.src "
                    "WHERE m.namespace = ? GROUP BY e.type", (ns,)).fetchall()},
                "events": one("SELECT count(*) FROM events WHERE namespace = ?"),
            }

    def archive_snapshot(
        self, namespace: str | None
    ) -> contextlib.AbstractContextManager[PostgresSnapshot]:
        """A read snapshot for the archive (see :mod:`tideline.store.postgres.dump`)."""
        from tideline.store.postgres import dump

        return dump.snapshot(self, namespace)

    def archive_loader(self, dim: int) -> contextlib.AbstractContextManager[PostgresLoader]:
        """One write transaction that loads archived rows."""
        from tideline.store.postgres import dump

        return dump.load(self, dim)
