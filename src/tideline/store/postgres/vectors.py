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
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from tideline.store.postgres.schema import HNSW_MAX_DIM, ensure_vector_index
from tideline.store.postgres.store import vector_text

if TYPE_CHECKING:
    from tideline.store.postgres.store import PostgresStore

__all__ = ["PostgresVectorSpaces"]

_CENTROID_SAMPLE = 4096
_CENTROID_LEAST = 50
_COUNT_SECONDS = 30.0


class PostgresVectorSpaces:
    """The VectorSpaces API (search, centroid, rebuild_all, close) backed by SQL.

    Args:
        store: the PostgreSQL store.
        dim: vector dimension of the embedder in use.
        marker: the embedder marker (the store checked it on open).
        ef_search: HNSW candidate list size per search (at least 2·k is used).
    """

    def __init__(self, store: PostgresStore, dim: int, marker: str, *,
                 ef_search: int = 100) -> None:
        self.store = store
        self.dim = int(dim)
        self.marker = marker
        self.ef_search = ef_search
        self.indexed = self.dim <= HNSW_MAX_DIM
        self._lock = threading.Lock()
        self._centroids: dict[str, tuple[int, np.ndarray, float]] = {}
        self._counts: dict[str, tuple[float, int]] = {}
        if self.indexed:
            with store.db.write() as c:
                ensure_vector_index(c, self.dim)

    def _space_query(self, exact: bool) -> str:
        # The expression and predicate match the partial index of this dimension; adding
        # 0 to the distance keeps the planner from the index (an exact scan of the space).
        d = self.dim
        dist = f"(emb::vector({d}) <=> ?::vector({d}))" + (" + 0" if exact else "")
        return (f"SELECT key, {dist} AS distance FROM vectors WHERE space = ? "  # noqa: S608
                f"AND vector_dims(emb) = {d} ORDER BY distance LIMIT ?")

    def search(self, kind: str, scopes: Sequence[str], query: np.ndarray,
               k: int) -> dict[int, float]:
        """Top-``k`` keys per scope merged: ``{key: cosine}``."""
        q = np.asarray(query, dtype=np.float32).ravel()
        if k <= 0 or q.shape[0] != self.dim or not np.isfinite(q).all() or not q.any():
            return {}
        text = vector_text(q)
        hits: dict[int, float] = {}
        with self.store.db.read() as c, c.transaction():  # SET LOCAL needs a transaction
            if self.indexed:
                c.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                c.execute(f"SET LOCAL hnsw.ef_search = {max(self.ef_search, 2 * int(k))}")
            for scope in dict.fromkeys(scopes):
                space = self.store.space(kind, scope)
                rows = c.execute(f"SELECT key, distance FROM ({self._space_query(False)}) "  # noqa: S608
                                 "AS found ORDER BY distance",
                                 (text, space, k)).fetchall() if self.indexed else []
                if len(rows) < k:
                    rows = c.execute(self._space_query(True), (text, space, k)).fetchall()
                for key, distance in rows:
                    hits[int(key)] = 1.0 - float(distance)
        return hits

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
        if not len(vecs):
            return None
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        unit_rows = (vecs / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        mean = unit_rows.mean(axis=0)
        length = float(np.linalg.norm(mean))
        if length == 0.0:
            return None
        unit = (mean / length).astype(np.float32)
        level = float((unit_rows @ unit).mean())
        with self._lock:
            self._centroids[space] = (n, unit, level)
        return unit, level

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
        return {str(s): int(n) for s, n in rows}

    def close(self) -> None:
        """Drop the cached centroids (nothing to persist: the server holds the index)."""
        with self._lock:
            self._centroids.clear()
            self._counts.clear()
