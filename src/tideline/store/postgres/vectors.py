"""Vector search on PostgreSQL: pgvector HNSW (cosine) over the ``vectors`` table.

A space (memories or turns of one scope of one namespace) is a filter on
``vectors.space``, and one HNSW index per dimension serves every space. A filtered
HNSW scan alone may stop before it found k rows of a small space; with
``hnsw.iterative_scan = relaxed_order`` it goes on scanning until k rows pass the
filter (or ``hnsw.max_scan_tuples``). When a space still yields fewer than k rows, it
is searched exactly (its rows through the ``(space, key)`` index), so a selective scope
filter always returns min(k, rows of the space) results.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tideline.errors import StoreError
from tideline.store.postgres.lock_keys import LOCK_ANALYZE
from tideline.store.postgres.pgvector import VectorParam
from tideline.store.postgres.schema import HNSW_MAX_DIM, ensure_vector_index
from tideline.store.rows import memory_from_row
from tideline.vecmath import centroid_of

if TYPE_CHECKING:
    from tideline.models import MemoryRecord
    from tideline.store.postgres.connection import Database
    from tideline.store.postgres.session import Conn

__all__ = ["GATE_EF_SEARCH", "PostgresVectorSpaces", "VectorHost", "candidate_list"]

_CENTROID_SAMPLE = 4096
_CENTROID_LEAST = 50
_COUNT_SECONDS = 30.0
#: How soon a memory space that may have crossed a threshold is counted again.
_RECOUNT_SECONDS = 1.0
#: Spaces of at most this many vectors are searched exactly (as SQLite's local index
#: below 20,000); a growing space may stay exact for up to ``_COUNT_SECONDS`` longer.
EXACT_MAX = 20_000
#: ... unless the space is at least this share of the index: a filter that passes most
#: rows costs the HNSW scan little recall.
_INDEX_SHARE = 0.5
_ALWAYS_EXACT = 1_000  # vectors: exact costs less than the HNSW scan and its settings
#: HNSW candidates of the gate's search (pgvector's default; recall's is ``ef_search``).
GATE_EF_SEARCH = 40
#: The index size at which a search takes its full ``ef_search`` (see candidate_list).
FULL_EF_AT = 1_000_000
# The hnsw.ef_search each pooled connection's session was given (see _settings).
_SESSION_EF: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


class VectorHost(Protocol):
    """What :class:`PostgresVectorSpaces` needs from its store (a
    :class:`~tideline.store.postgres.store.PostgresStore` is one)."""

    @property
    def db(self) -> Database:
        """The store's connection pool."""

    @property
    def top_id(self) -> int:
        """The highest memory id this process wrote (0: none yet)."""

    def space(self, kind: str, scope: str) -> str:
        """Name of the vector space of memories (``m``) or turns (``t``) of one scope."""

    def scopes(self) -> list[str]:
        """Every scope that holds memories or turns in the store's namespace."""

    def remember_target(self, rec: MemoryRecord, digest: bytes) -> None:
        """Keep the gate's nearest live neighbour as its search read it."""


def candidate_list(ef_search: int, k: int, total: float) -> int:
    """The ``hnsw.ef_search`` of one recall search: ``max(ef_search, 2k)`` on an index of
    :data:`FULL_EF_AT` vectors or more, a proportional share of it on a smaller one, but
    never fewer than ``k`` or pgvector's default 40 (nor more than the full list).

    The HNSW scan's cost grows with its candidate list (at 100k vectors: about 3 ms of
    server CPU at 100 candidates, half that at 40), and the list it needs grows with
    the graph: clustered 384-d vectors gave recall@10 1.000 at 40 and at 100 candidates
    at 100k, 0.78 and 0.92 at 1M (docs/scale.md). So a 100k index is scanned with k
    candidates (the recall pipeline's recall@10 through the index stayed 1.06x the exact
    scan's, docs/lab/postgres-recall.md) and a 1M one with the full list, as before.

    Args:
        ef_search: the full candidate list (:class:`PostgresVectorSpaces`' ``ef_search``).
        k: the rows the search returns.
        total: the planner's estimate of the vectors in the index (-1: not analysed yet,
            taken as a full-sized index).

    Returns:
        The candidate list size.
    """
    full = max(int(ef_search), 2 * int(k))
    if total < 0 or total >= FULL_EF_AT:
        return full
    share = -(-full * int(total) // FULL_EF_AT)  # ceiling
    return min(full, max(int(k), GATE_EF_SEARCH, share))


class PostgresVectorSpaces:
    """The VectorSpaces API (search, centroid, rebuild_all, close) backed by SQL.

    Args:
        store: the PostgreSQL store (what it offers: :class:`VectorHost`).
        dim: vector dimension of the embedder in use.
        marker: the embedder marker (the store checked it on open).
        ef_search: HNSW candidate list size per search of an index of
            :data:`FULL_EF_AT` vectors or more (at least 2·k is used; a smaller index
            takes fewer, see :func:`candidate_list`).
        exact_max: spaces of at most this many vectors are searched exactly.
    """

    def __init__(self, store: VectorHost, dim: int, marker: str, *,
                 ef_search: int = 100, exact_max: int = EXACT_MAX) -> None:
        self.store = store
        self.dim = int(dim)
        self.marker = marker
        self.ef_search = ef_search
        self.exact_max = int(exact_max)
        self.indexed = self.dim <= HNSW_MAX_DIM
        self._lock = threading.Lock()
        self._centroids: dict[str, tuple[int, np.ndarray, float]] = {}
        self._counts: dict[str, tuple[float, int]] = {}
        self._sizes: dict[str, tuple[float, int, float, int]] = {}
        # (While no primary answers, a store opened read-only from a standby has the
        # index the primary made: a standby takes no DDL.)
        if self.indexed and not store.db.read_only():
            with store.db.write() as c:
                ensure_vector_index(c, self.dim)

    def _space_query(self, exact: bool) -> str:
        # The expression and predicate match the partial index of this dimension; adding
        # 0 to the distance keeps the planner from the index (an exact scan of the space,
        # its rows found through the (space, key) b-tree, sorted by distance).
        d = self.dim
        dist = f"(v::vector({d}) <=> ?::vector({d}))" + (" + 0" if exact else "")
        return (f"SELECT key, {dist} AS distance FROM vectors WHERE space = ? "  # noqa: S608
                f"AND vector_dims(v) = {d} ORDER BY distance LIMIT ?")

    def _exact(self, space: str) -> bool:
        """Whether to search a space exactly: a small space that is not most of the index
        (see :meth:`search`)."""
        if not self.indexed:
            return True
        n, total = self._size(space)
        return n <= _ALWAYS_EXACT or (n <= self.exact_max
                                      and (total <= 0 or n < _INDEX_SHARE * total))

    def search(self, kind: str, scopes: Sequence[str], query: np.ndarray,
               k: int) -> dict[int, float]:
        """Top-``k`` keys per scope merged: ``{key: cosine}``.

        A space of at most ``exact_max`` vectors that is under half of the index (or of
        at most 1,000) is searched exactly: a filtered HNSW scan of a small space among
        many stops at the first k rows that pass the filter (``hnsw.iterative_scan``),
        about half of the true top k; the exact scan reads only that space's rows, and
        is exact. A larger space is searched through the HNSW index with iterative
        scans, and exactly after all if that yields fewer than k. Every space of the
        call is searched in one statement.
        """
        q = np.asarray(query, dtype=np.float32).ravel()
        if k <= 0 or q.shape[0] != self.dim or not np.isfinite(q).all() or not q.any():
            return {}
        text = VectorParam(q)
        spaces = [self.store.space(kind, scope) for scope in dict.fromkeys(scopes)]
        plans = [(space, self._exact(space)) for space in spaces]
        hits: dict[int, float] = {}
        rows = self._run(plans, text, k)
        short = [space for space, exact in plans
                 if not exact and sum(1 for r in rows if r[0] == space) < k]
        if short:
            rows = [r for r in rows if r[0] not in short]
            rows += self._run([(space, True) for space in short], text, k)
        for _space, key, distance in rows:
            hits[int(key)] = 1.0 - float(distance)
        return hits

    def _run(self, plans: Sequence[tuple[str, bool]], text: VectorParam,
             k: int) -> list[tuple[str, int, float]]:
        """(space, key, distance) of the top ``k`` of each space, in one statement."""
        parts = [f"(SELECT ?::text AS space, found.* FROM ({self._space_query(exact)}) "  # noqa: S608
                 "AS found)" for _space, exact in plans]
        args: list[object] = []
        for space, _exact in plans:
            args += [space, text, space, k]
        sql = " UNION ALL ".join(parts)
        indexed = [self._size(space)[1] for space, exact in plans if not exact]
        with self.store.db.read() as c:
            if indexed:
                self._settings(c, candidate_list(self.ef_search, int(k), max(indexed)))
            return [(str(s), int(key), float(d)) for s, key, d in c.execute(sql, args)]

    def gate_neighbours(self, namespace: str, scope: str, query: np.ndarray,
                        k: int) -> list[tuple[int, float, str | None]]:
        """The novelty gate's search: the top ``k`` memories of one scope as (key, cosine,
        status — None when ``namespace`` holds no such memory), nearest first.

        The same plan as :meth:`search` (an exact scan of a small space, the HNSW index
        of a large one, exact after all when the index yields fewer than ``k``), with
        the neighbours' status read in the same statement and :data:`GATE_EF_SEARCH`
        candidates: the gate judges only the nearest few.
        """
        q = np.asarray(query, dtype=np.float32).ravel()
        if k <= 0 or q.shape[0] != self.dim or not np.isfinite(q).all() or not q.any():
            return []
        space = self.store.space("m", scope)
        exact = self._exact(space)
        rows = self._gate_run(namespace, space, q, k, exact)
        if not exact and len(rows) < k:
            rows = self._gate_run(namespace, space, q, k, True)
        return rows

    def keyed_gate_neighbours(
        self, namespace: str, scope: str, query: np.ndarray, k: int, key: str,
        since: float | None,
    ) -> tuple[tuple[int, str, float, int | None] | None,
               list[tuple[int, float, str | None]]] | None:
        """:meth:`gate_neighbours` and the idempotency key's stored outcome (at or after
        ``since``; None: unseen) in one statement (the same plan and fallback); None
        when ``query`` cannot be searched (not a finite nonzero vector of the dimension).
        """
        q = np.asarray(query, dtype=np.float32).ravel()
        if k <= 0 or q.shape[0] != self.dim or not np.isfinite(q).all() or not q.any():
            return None
        space = self.store.space("m", scope)
        exact = self._exact(space)
        seen, rows = self._keyed_run(namespace, space, q, k, key, since, exact)
        if seen is None and not exact and len(rows) < k:
            seen, rows = self._keyed_run(namespace, space, q, k, key, since, True)
        return seen, rows

    def _keyed_run(
        self, namespace: str, space: str, q: np.ndarray, k: int, key: str,
        since: float | None, exact: bool,
    ) -> tuple[tuple[int, str, float, int | None] | None, list[tuple[int, float, str | None]]]:
        from tideline.store.postgres.writes import keyed_gate_sql

        with self.store.db.read() as c:
            if not exact:
                self._settings(c, max(GATE_EF_SEARCH, 2 * int(k)))
            args = (namespace, VectorParam(q), space, k, namespace, key,
                    float("-inf") if since is None else since)
            found = c.execute(keyed_gate_sql(self.dim, exact), args).fetchall()
        first = found[0] if found else None
        seen = None if first is None or first[3] is None else (
            int(first[3]), str(first[4]), float(first[5]), first[6])
        # The nearest live neighbour's row and digest (on its line only): the target a
        # potentiation judges, without a read of its own (PostgresStore.gate_target).
        for row in found:
            if row[7] is not None:
                self.store.remember_target(memory_from_row(row[7:-1]), bytes(row[-1]))
                break
        return seen, [(int(n), 1.0 - float(d), None if status is None else str(status))
                      for n, d, status, *_ in found if n is not None]

    def _gate_run(self, namespace: str, space: str, q: np.ndarray, k: int,
                  exact: bool) -> list[tuple[int, float, str | None]]:
        from tideline.store.postgres.writes import gate_sql

        with self.store.db.read() as c:
            if not exact:
                self._settings(c, max(GATE_EF_SEARCH, 2 * int(k)))
            vec = VectorParam(q)
            args = (namespace, vec, space, k)
            rows = c.execute(gate_sql(self.dim, exact), args).fetchall()
        return [(int(key), 1.0 - float(d), None if status is None else str(status))
                for key, d, status in rows]

    @staticmethod
    def _settings(c: Conn, ef: int) -> None:
        """Iterative HNSW scans and ``ef`` candidates for this connection's next scan.

        Outside a transaction they are set for the session, once per pooled connection
        (and again when ``ef`` changes): no BEGIN, SET LOCAL and COMMIT round trips per
        search. Only this class scans the HNSW index, and it always sets what it needs
        first. Inside a transaction they are local to it (a rollback would undo a
        session setting made there, and the cache would be wrong).
        """
        if c.in_transaction:
            c.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                      "set_config('hnsw.ef_search', ?, true)", (str(ef),))
            return
        if _SESSION_EF.get(c.raw) == ef:
            return
        c.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false), "
                  "set_config('hnsw.ef_search', ?, false)", (str(ef),))
        _SESSION_EF[c.raw] = ef

    def _size(self, space: str) -> tuple[int, float]:
        """The vectors of a space, counted up to ``exact_max + 1`` (an index-only walk of
        at most that many entries), and the planner's estimate of all vectors (-1 before
        the first analyze), cached for a while per process.

        A memory space is counted again sooner (at most once a second) when it may have
        crossed :data:`_ALWAYS_EXACT` or ``exact_max`` since: memory ids only grow, so
        the highest id this process wrote (``PostgresStore.top_id``, every host's writes
        move it) less the one at the count bounds the memories written meanwhile. A
        space found past :data:`_ALWAYS_EXACT` in a table never analysed is analysed
        then (:meth:`_analyze`), so the planner takes the HNSW index for it now rather
        than after autovacuum's first look.
        """
        now = time.monotonic()
        top = self.store.top_id
        with self._lock:
            cached = self._sizes.get(space)
        if cached is not None and now - cached[0] < _COUNT_SECONDS:
            at, n, total, counted_top = cached
            if not (space.startswith("m:") and now - at >= _RECOUNT_SECONDS
                    and self._may_cross(n, top - counted_top)):
                return n, total
        n, total = self._read_size(space)
        if (n > _ALWAYS_EXACT and total < 0 and not self.store.db.in_use()
                and self._analyze()):
            n, total = self._read_size(space)
        with self._lock:
            self._sizes[space] = (now, n, total, top)
        return n, total

    def _may_cross(self, n: int, grown: int) -> bool:
        """Whether ``grown`` more vectors could carry a space of ``n`` past a threshold
        that changes its plan."""
        return any(n <= limit < n + grown for limit in (_ALWAYS_EXACT, self.exact_max))

    def _read_size(self, space: str) -> tuple[int, float]:
        with self.store.db.read() as c:
            row = c.execute("SELECT (SELECT count(*) FROM (SELECT 1 FROM vectors "
                            "WHERE space = ? LIMIT ?) AS held), (SELECT reltuples FROM "
                            "pg_class WHERE oid = 'vectors'::regclass)",
                            (space, self.exact_max + 1)).fetchone()
        return int(row[0]), float(row[1] if row[1] is not None else -1)

    def _analyze(self) -> bool:
        """``ANALYZE vectors`` once, by whichever process gets to it first (others skip
        it rather than wait; ``False``). Before the first analyze the planner knows no
        row count and scans a space exactly whatever the query asks; autovacuum's
        first analyze can be a minute or more away. Without the right to analyze the
        table, the server warns and skips: nothing changes. Never inside a caller's
        transaction (the caller checks), which the lock would then outlive."""
        try:
            with self.store.db.write() as c:
                got = c.execute("SELECT pg_try_advisory_xact_lock(?, 0)",
                                (LOCK_ANALYZE,)).fetchone()[0]
                if got:
                    c.execute("ANALYZE vectors")
        except StoreError:
            return False
        return bool(got)

    def _count(self, space: str) -> int:
        now = time.monotonic()
        with self._lock:
            cached = self._counts.get(space)
        if cached is not None and now - cached[0] < _COUNT_SECONDS:
            return cached[1]
        with self.store.db.read() as c:
            n = int(c.execute("SELECT count(*) FROM vectors WHERE space = ?",
                              (space,)).fetchone()[0])
        with self._lock:
            self._counts[space] = (now, n)
        return n

    def centroid(self, kind: str, scope: str) -> tuple[np.ndarray, float] | None:
        """The unit mean direction of a space's vectors and their mean cosine to it
        (from a sample of up to 4096; None below 50 vectors), cached until the space
        grew or shrank by a tenth."""
        space = self.store.space(kind, scope)
        n = self._count(space)
        with self._lock:
            cached = self._centroids.get(space)
        if cached is not None and abs(n - cached[0]) <= 0.1 * cached[0]:
            return cached[1], cached[2]
        if n < _CENTROID_LEAST:
            return None
        with self.store.db.read() as c:
            rows = c.execute("SELECT v FROM vectors WHERE space = ? ORDER BY md5(key::text) "
                             "LIMIT ?", (space, _CENTROID_SAMPLE)).fetchall()
        vecs = np.stack([np.frombuffer(bytes(r[0]), dtype=np.float32) for r in rows
                         if len(r[0]) == 4 * self.dim]) if rows else np.zeros((0, self.dim))
        found = centroid_of(vecs)
        if found is None:
            return None
        with self._lock:
            self._centroids[space] = (n, *found)
        return found

    def rebuild_all(self) -> dict[str, int]:
        """Rebuild the HNSW index of this dimension; returns vector counts by space."""
        with self.store.db.write() as c:
            if self.indexed:
                ensure_vector_index(c, self.dim)
                c.execute(f"REINDEX INDEX vectors_hnsw_{self.dim}")
            spaces = [self.store.space(kind, scope) for scope in self.store.scopes()
                      for kind in ("m", "t")]
            rows = c.execute("SELECT space, count(*) FROM vectors WHERE space = ANY(?) "
                             "GROUP BY space", (spaces,)).fetchall()
        with self._lock:
            self._centroids.clear()
            self._counts.clear()
            self._sizes.clear()
        return {str(s): int(n) for s, n in rows}

    def warm(self) -> dict[str, int]:
        """Read this dimension's HNSW index into the server's shared buffers with
        ``pg_prewarm`` (created if missing; skipped, returning ``{}``, where the role may
        not create it or the server lacks it).

        After a server restart the buffers are empty, and each search at 1M vectors then
        reads about 2,000 index pages from the operating system's cache: 20-30 ms
        instead of about 13 (docs/lab/postgres-recall.md). A server kept warm across restarts by
        ``pg_prewarm.autoprewarm`` (docs/postgres.md) does not need this.

        Returns:
            ``{index name: pages read}``.
        """
        if not self.indexed:
            return {}
        name = f"vectors_hnsw_{self.dim}"
        try:
            with self.store.db.write() as c:
                c.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        except StoreError:
            return {}
        with self.store.db.read() as c:
            row = c.execute("SELECT pg_prewarm(?::regclass)", (name,)).fetchone()
        return {name: int(row[0]) if row else 0}

    def close(self) -> None:
        """Drop the cached centroids (nothing to persist: the server holds the index)."""
        with self._lock:
            self._centroids.clear()
            self._counts.clear()
            self._sizes.clear()
