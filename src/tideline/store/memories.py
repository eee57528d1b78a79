"""Memory, idempotency-key and edge rows of one namespace, for every backend.

Portable SQL (``?`` placeholders, ``RETURNING id``, ``ON CONFLICT``): the SQLite and the
PostgreSQL store both inherit :class:`MemoryRows` and keep only what differs — their
full-text index rows (:meth:`MemoryRows._index_memory`), their vector rows, and the locks
PostgreSQL takes while reading (``get_memories``, :meth:`MemoryRows._hold_write_key`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from tideline.errors import NotFound
from tideline.models import Edge, MemoryRecord
from tideline.store.rows import (
    MEMORY_COLUMNS,
    BackendRows,
    json_list,
    mark_pending,
    memory_from_row,
)
from tideline.store.sql import placeholders

if TYPE_CHECKING:
    import numpy as np

    from tideline.store.base import VectorSearch

__all__ = ["MEMORY_INSERT", "MEMORY_UPDATE", "MemoryRows", "best_live", "memory_params",
           "update_params", "write_key_insert"]

#: A new memory row (its id from the identity); parameters: :func:`memory_params`.
MEMORY_INSERT = (
    "INSERT INTO memories(namespace, scope, kind, gesture, context, cognition_direction, "
    "tags, entities_role, related_entities, source_links, importance, emotional, "
    "recurrence, unresolved, weight, strength, stability, reinforcements, last_access, "
    "status, version, supersedes, event_time, recorded_at, updated_at) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
#: Every mutable field of one memory written back; parameters: :func:`update_params`.
MEMORY_UPDATE = (
    "UPDATE memories SET kind=?, gesture=?, context=?, cognition_direction=?, tags=?, "
    "entities_role=?, related_entities=?, source_links=?, importance=?, emotional=?, "
    "recurrence=?, unresolved=?, weight=?, strength=?, stability=?, reinforcements=?, "
    "last_access=?, status=?, version=?, event_time=?, updated_at=? "
    "WHERE id = ? AND namespace = ?"
)


def memory_params(namespace: str, rec: MemoryRecord) -> tuple[Any, ...]:
    """The parameters of :data:`MEMORY_INSERT` for ``rec`` in ``namespace``."""
    return (
        namespace, rec.scope, rec.kind, rec.gesture, rec.context,
        rec.cognition_direction, json_list(rec.tags), rec.entities_role,
        json_list(rec.related_entities), json_list(rec.source_links), rec.importance,
        rec.emotional, rec.recurrence, rec.unresolved, rec.weight, rec.strength,
        rec.stability, rec.reinforcements, rec.last_access, rec.status, rec.version,
        rec.supersedes, rec.event_time, rec.recorded_at, rec.updated_at,
    )


def write_key_insert(*, refresh: bool, memory_from: str | None = None) -> str:
    """The statement recording an idempotency key's outcome; parameters: namespace, key,
    memory id, decision, similarity, nearest, time (``memory_from``: instead of the id,
    the name of a row source whose ``id`` column is the memory's; ``refresh``: replace
    an older outcome of the key)."""
    action = ("DO UPDATE SET memory_id = excluded.memory_id, decision = excluded.decision, "
              "similarity = excluded.similarity, nearest = excluded.nearest, "
              "created_at = excluded.created_at") if refresh else "DO NOTHING"
    head = "INSERT INTO write_keys(namespace, key, memory_id, decision, similarity, nearest, "
    if memory_from is not None:
        return (f"{head}created_at) SELECT ?, ?, id, ?, ?, ?, ? FROM {memory_from} "
                f"ON CONFLICT (namespace, key) {action}")
    return f"{head}created_at) VALUES (?,?,?,?,?,?,?) ON CONFLICT (namespace, key) {action}"


def best_live(hits: Iterable[tuple[int, float, str | None]]) -> tuple[int | None, float]:
    """The nearest of (key, cosine, status) hits whose memory exists (status not None)
    and is not superseded; the first of equals in the hits' order."""
    ranked = sorted(((key, sim) for key, sim, status in hits
                     if status is not None and status != "superseded"), key=lambda kv: -kv[1])
    if not ranked:
        return None, 0.0
    return ranked[0][0], float(ranked[0][1])


def update_params(namespace: str, rec: MemoryRecord) -> tuple[Any, ...]:
    """The parameters of :data:`MEMORY_UPDATE` for ``rec`` (same id) in ``namespace``."""
    return (
        rec.kind, rec.gesture, rec.context, rec.cognition_direction, json_list(rec.tags),
        rec.entities_role, json_list(rec.related_entities), json_list(rec.source_links),
        rec.importance, rec.emotional, rec.recurrence, rec.unresolved, rec.weight,
        rec.strength, rec.stability, rec.reinforcements, rec.last_access, rec.status,
        rec.version, rec.event_time, rec.updated_at, rec.id, namespace,
    )

# The orders list_memories accepts (anything else falls back to the first).
_ORDERS = ("recorded_at DESC", "weight DESC", "id ASC", "last_access DESC")
# Rows keyed by a memory that go when it is deleted (edges and index rows cascade).
_KEYED_BY_MEMORY = ("write_keys", "attention_log", "eligibility")


class MemoryRows(BackendRows):
    """Memory rows over ``self.db`` for ``self.namespace`` (a base of each backend's store).

    Attributes:
        _edge_order: the ORDER BY of :meth:`edges_of` (PostgreSQL's; SQLite's plan
            order is kept as it was).
    """

    _edge_order = ""

    if TYPE_CHECKING:  # defined by each backend's store (space: by NamespaceRows)
        def space(self, kind: str, scope: str) -> str: ...

        def get_memories(self, ids: Iterable[int], c: Any = None) -> dict[int, MemoryRecord]: ...

        def _index_memory(self, c: Any, mid: int, rec: MemoryRecord) -> None: ...

        def _unindex_memory(self, c: Any, mid: int) -> None: ...

        def _put_vector(self, c: Any, space: str, key: int, vector: np.ndarray) -> None: ...

        def _drop_vector(self, c: Any, space: str, key: int) -> None: ...

        def transaction(self) -> AbstractContextManager[Any]: ...

    # -- memories -------------------------------------------------------------------------

    def insert_memory(self, c: Any, rec: MemoryRecord, vector: np.ndarray | None) -> int:
        """Insert a memory with its index rows inside the caller's transaction (its
        vector, or the pending mark when the embedder gave none)."""
        row = c.execute(MEMORY_INSERT + " RETURNING id",
                        memory_params(self.namespace, rec)).fetchone()
        mid = int(row[0])
        self._index_memory(c, mid, rec)
        if vector is not None:
            self._put_vector(c, self.space("m", rec.scope), mid, vector)
        else:
            mark_pending(c)
        return mid

    def bulk_load(self, expected: int = 0) -> AbstractContextManager[Any]:
        """One write transaction for a large load of about ``expected`` rows through
        :meth:`insert_memories` (here the ordinary one; PostgreSQL's defers the derived
        indexes of tables holding fewer rows than that)."""
        del expected
        return self.transaction()

    def insert_memories(self, c: Any, recs: Sequence[MemoryRecord],
                        vectors: Sequence[np.ndarray | None]) -> list[int]:
        """Insert many memories (each as :meth:`insert_memory`) in the caller's transaction;
        returns their new ids in order."""
        return [self.insert_memory(c, rec, vec) for rec, vec in zip(recs, vectors, strict=True)]

    def update_memory(self, c: Any, rec: MemoryRecord) -> None:
        """Write back every mutable field of ``rec`` (same id) and refresh its index rows."""
        c.execute(MEMORY_UPDATE, update_params(self.namespace, rec))
        self._index_memory(c, rec.id, rec)

    def set_status(self, c: Any, mid: int, status: str, now: float) -> None:
        """Change a memory's status (e.g. to ``superseded``) and bump its version."""
        c.execute(
            "UPDATE memories SET status = ?, version = version + 1, updated_at = ? "
            "WHERE id = ? AND namespace = ?",
            (status, now, mid, self.namespace),
        )

    @abstractmethod
    def _hold_write_key(self, c: Any, key: str) -> None:
        """Inside a write transaction, hold idempotency ``key`` until it ends, so that two
        writers of one key never both find it unseen (``c``: the reading connection)."""

    def write_key(self, key: str, *,
                  since: float | None = None) -> tuple[int, str, float, int | None] | None:
        """The stored outcome of an idempotency key, if it was seen (at or after ``since``).

        Read inside a write transaction, the key is held until commit
        (:meth:`_hold_write_key`), so two writers of one key never both find it unseen.
        """
        with self.db.read() as c:
            self._hold_write_key(c, key)
            row = c.execute(
                "SELECT memory_id, decision, similarity, nearest FROM write_keys "
                "WHERE namespace = ? AND key = ? AND created_at >= ?",
                (self.namespace, key, float("-inf") if since is None else since),
            ).fetchone()
        if row is None:
            return None
        return int(row[0]), str(row[1]), float(row[2]), row[3]

    #: The gate's first reads (the key's outcome, the neighbours) go to the server in one
    #: statement (:meth:`keyed_nearest_live`), after the embedding; False: the key is read
    #: first, so a replay embeds nothing (a local read costs less than an embedding).
    key_with_gate = False

    def keyed_nearest_live(
        self, vectors: VectorSearch, scope: str, vector: np.ndarray, k: int, key: str, *,
        since: float | None = None,
    ) -> tuple[tuple[int, str, float, int | None] | None, tuple[int | None, float]]:
        """The idempotency key's stored outcome (as :meth:`write_key`) and, when it has
        none, the gate's neighbour (as :meth:`nearest_live`; ``(None, 0.0)`` after a
        replay)."""
        seen = self.write_key(key, since=since)
        if seen is not None:
            return seen, (None, 0.0)
        return None, self.nearest_live(vectors, scope, vector, k)

    def commit_reads(
        self, c: Any, key: str, *, since: float | None, lock: Sequence[int],
    ) -> tuple[tuple[int, str, float, int | None] | None, dict[int, MemoryRecord]]:
        """Inside the write transaction ``c``: the key's stored outcome (the key held until
        commit, see :meth:`write_key`) and the memories ``lock`` (locked until commit on
        PostgreSQL, see :meth:`get_memories`; none read after a replay)."""
        seen = self.write_key(key, since=since)
        if seen is not None or not lock:
            return seen, {}
        return None, self.get_memories(lock, c)

    def record_write_key(
        self, c: Any, key: str, mid: int, decision: str, similarity: float,
        nearest: int | None, now: float, *, refresh: bool = False,
    ) -> None:
        """Remember the outcome of an idempotency key (``refresh``: replace an older one)."""
        c.execute(write_key_insert(refresh=refresh),
                  (self.namespace, key, mid, decision, similarity, nearest, now))

    def nearest_live(self, vectors: VectorSearch, scope: str, vector: np.ndarray,
                     k: int) -> tuple[int | None, float]:
        """The novelty gate's neighbour: of the ``k`` nearest memories of ``scope``, the
        nearest one not superseded, and its cosine (``(None, 0.0)``: none)."""
        hits = vectors.search("m", [scope], vector, k)
        if not hits:
            return None, 0.0
        live = self.get_memories(hits)
        return best_live((key, sim, live[key].status if key in live else None)
                         for key, sim in hits.items())

    def delete_memory(self, c: Any, mid: int) -> MemoryRecord:
        """Really delete a memory: row, index rows, vector, edges, idempotency keys.

        Raises:
            NotFound: no such memory in this namespace.
        """
        rec = self.get_memory(mid, c)
        self._unindex_memory(c, mid)
        self._drop_vector(c, self.space("m", rec.scope), mid)
        for table in _KEYED_BY_MEMORY:
            c.execute(f"DELETE FROM {table} WHERE namespace = ? AND memory_id = ?",
                      (self.namespace, mid))
        c.execute("DELETE FROM memories WHERE id = ? AND namespace = ?", (mid, self.namespace))
        return rec

    def get_memory(self, mid: int, c: Any = None) -> MemoryRecord:
        """One memory by id.

        Raises:
            NotFound: no such memory in this namespace.
        """
        found = self.get_memories([mid], c)
        if mid not in found:
            raise NotFound(f"no memory with id {mid}")
        return found[mid]

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
        if order not in _ORDERS:
            order = _ORDERS[0]
        sql = (f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {' AND '.join(where)} "
               f"ORDER BY {order}{self._tiebreak} LIMIT ?")
        with self.db.read() as c:
            rows = c.execute(sql, (*args, limit)).fetchall()
        return [memory_from_row(r) for r in rows]

    def _filters(
        self, *, scopes: Sequence[str] | None, kind: str | None = None, alias: str = "",
        since: float | None = None, until: float | None = None,
    ) -> tuple[list[str], list[Any]]:
        """WHERE conditions (and their parameters) on memories of this namespace."""
        p = f"{alias}." if alias else ""
        # With an alias (a join from a full-text table) the match must drive the query.
        hint = self._no_index if alias else ""
        where = [f"{hint}{p}namespace = ?"]
        args: list[Any] = [self.namespace]
        if scopes is not None:
            where.append(f"{hint}{p}scope IN ({placeholders(len(scopes))})")
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

    # -- edges ----------------------------------------------------------------------------

    def add_edge(self, c: Any, src: int, dst: int, etype: str, weight: float,
                 now: float) -> None:
        """Create or strengthen a typed edge (weights add up, capped at 1)."""
        c.execute(
            "INSERT INTO edges(src, dst, type, weight, created_at, updated_at) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT(src, dst, type) DO UPDATE SET "
            "weight = CASE WHEN edges.weight + excluded.weight > 1.0 THEN 1.0 "
            "ELSE edges.weight + excluded.weight END, updated_at = excluded.updated_at",
            (src, dst, etype, weight, now, now),
        )

    def copy_edges(self, c: Any, old: int, new: int, types: Sequence[str], now: float) -> None:
        """Give a new version the associative edges of the version it supersedes."""
        ph = placeholders(len(types))
        c.execute(
            "INSERT INTO edges(src, dst, type, weight, created_at, updated_at) "
            "SELECT ?, dst, type, weight, ?, ? FROM edges WHERE src = ? AND dst != ? "
            f"AND type IN ({ph}) ON CONFLICT DO NOTHING", (new, now, now, old, new, *types),
        )
        c.execute(
            "INSERT INTO edges(src, dst, type, weight, created_at, updated_at) "
            "SELECT src, ?, type, weight, ?, ? FROM edges WHERE dst = ? AND src != ? "
            f"AND type IN ({ph}) ON CONFLICT DO NOTHING", (new, now, now, old, new, *types),
        )

    def edges_of(self, ids: Sequence[int], types: Sequence[str] | None = None) -> list[Edge]:
        """Edges touching any of ``ids`` (both directions; the first :attr:`_chunk` ids)."""
        if not ids:
            return []
        idl = [int(i) for i in ids][:self._chunk]
        ph = placeholders(len(idl))
        sql = f"SELECT src, dst, type, weight FROM edges WHERE (src IN ({ph}) OR dst IN ({ph}))"
        args: list[Any] = [*idl, *idl]
        if types:
            sql += f" AND type IN ({placeholders(len(types))})"
            args.extend(types)
        with self.db.read() as c:
            rows = c.execute(sql + self._edge_order, args).fetchall()
        return [Edge(int(a), int(b), str(t), float(w)) for a, b, t, w in rows]
