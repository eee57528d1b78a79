"""The row code every backend's store shares over one namespace: memories and edges
(:mod:`tideline.store.memories`), turn reads (:mod:`tideline.store.turns`), the journal,
the scopes and the counts — portable SQL, so each backend keeps only what differs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tideline.errors import EmbedderMismatch
from tideline.models import EDGE_OF_DECISION
from tideline.store.events import append_event
from tideline.store.memories import MemoryRows
from tideline.store.sql import placeholders
from tideline.store.turns import TurnRows

if TYPE_CHECKING:
    from tideline.models import MemoryRecord
    from tideline.store.agent import AgentReader
    from tideline.store.base import GatedWrite

__all__ = ["DF_CACHE_MIN", "DF_CACHE_SIZE", "NamespaceRows"]

#: Document frequencies at or above this many rows are cached (see each backend's
#: ``document_frequencies``), at most this many tokens a table.
DF_CACHE_MIN = 500
DF_CACHE_SIZE = 20_000


class NamespaceRows(MemoryRows, TurnRows):
    """The shared base of the SQLite and the PostgreSQL store.

    Attributes:
        _df_cache_seconds: how long a table's document-frequency cache is kept at the
            most (each backend's own: what a count costs differs).
        _df_caches: per table kind, (row count, monotonic time, token → count) of the
            cache (set up by each backend's ``__init__``).
    """

    _df_cache_seconds = 60.0
    _df_caches: dict[str, tuple[int, float, dict[str, int]]]

    def _check_marker(self, marker: str) -> None:
        """Record the embedder marker of a new store; refuse one built with another.

        Raises:
            EmbedderMismatch: the store was built with another embedder.
        """
        stored = self.db.get_meta("embedder")
        if stored is None:
            with self.db.write() as c:
                c.execute("INSERT INTO db_meta(key, value) VALUES ('embedder', ?) "
                          "ON CONFLICT (key) DO NOTHING", (marker,))
            stored = self.db.get_meta("embedder")
        if stored != marker and stored is not None:
            from tideline.embed.pending import fix_marker

            if fix_marker(stored, marker):  # the http endpoint answered at last
                with self.db.write() as c:
                    c.execute("UPDATE db_meta SET value = ? WHERE key = 'embedder' "
                              "AND value = ?", (marker, stored))
                stored = self.db.get_meta("embedder")
        if stored != marker:
            raise EmbedderMismatch(str(stored), marker)

    @property
    def agent(self) -> AgentReader:
        """The reads (and small writes) of injection, hooks and importers in this namespace."""
        from tideline.store.agent import AgentReader

        return AgentReader(self.db, self.namespace)

    def space(self, kind: str, scope: str) -> str:
        """Name of the vector space for memories (``m``) or turns (``t``) of one scope."""
        return f"{kind}:{self.namespace}:{scope}"

    def log_event(self, c: Any, kind: str, data: dict[str, Any],
                  memory_id: int | None = None, now: float | None = None) -> int:
        """Append one event to the journal (inside ``c`` if given, else its own
        transaction); returns its id (see :func:`tideline.store.events.append_event`)."""
        if c is not None:
            return append_event(c, self.namespace, kind, data, memory_id=memory_id, now=now)
        with self.db.write() as conn:
            return append_event(conn, self.namespace, kind, data, memory_id=memory_id, now=now)

    def record_gated(self, c: Any, write: GatedWrite) -> int:
        """Store what the gate decided, inside ``c`` (see
        :meth:`tideline.store.base.WriteRows.record_gated`); returns the memory's id."""
        if write.decision == "potentiate":
            self.update_memory(c, write.rec)
            mid = write.rec.id
        else:
            mid = self.insert_memory(c, write.rec, write.vector)
            edge = EDGE_OF_DECISION.get(write.decision)
            if edge is not None and write.nearest is not None:
                self.add_edge(c, mid, write.nearest, edge, round(write.similarity, 4),
                              write.now)
        self.record_write_key(c, write.key, mid, write.decision, write.similarity,
                              write.nearest, write.now, refresh=write.refresh_key)
        self.log_event(c, "write", write.event, memory_id=mid, now=write.now)
        return mid

    #: Whether :meth:`record_gated_at_once` is the cheaper way to store a gated write made
    #: outside a transaction (one statement on a database server; SQLite's own
    #: transaction costs less than the unlocked read of the target it needs first).
    gated_at_once = False

    def gate_target(self, mid: int) -> tuple[MemoryRecord | None, Any]:
        """The memory the gate would potentiate, read as it is now without a lock, and a
        token of its state for :meth:`record_gated_at_once` (here the record itself);
        ``(None, None)`` when the namespace holds no such memory."""
        rec = self.get_memories([int(mid)]).get(int(mid))
        return rec, rec

    def record_gated_at_once(
        self, write: GatedWrite, *, since: float | None, target: tuple[int, Any] | None,
    ) -> tuple[tuple[int, str, float, int | None] | None, int | None]:
        """Store a gated write in a transaction of its own, provided the key's outcome is
        not stored (at or after ``since``) and ``target`` (an id and its
        :meth:`gate_target` token) is as it was judged.

        Returns:
            (the key's stored outcome, None) for a replay; (None, the memory's id) when
            written; (None, None) when nothing was written because ``target`` changed.

        Raises:
            StoreBusy: the write lock could not be had.
        """
        with self.transaction() as c:
            seen, found = self.commit_reads(c, write.key, since=since,
                                            lock=[target[0]] if target is not None else [])
            if seen is not None:
                return seen, None
            if target is not None and found.get(target[0]) != target[1]:
                return None, None
            return None, self.record_gated(c, write)

    def events(self, *, kinds: Sequence[str] | None = None, limit: int = 50,
               since: float | None = None, before: int | None = None) -> list[dict[str, Any]]:
        """Journal entries, newest first (``before``: only those of a smaller id)."""
        sql = "SELECT id, ts, kind, memory_id, data FROM events WHERE namespace = ?"
        args: list[Any] = [self.namespace]
        if before is not None:
            sql += " AND id < ?"
            args.append(before)
        if kinds:
            sql += f" AND kind IN ({placeholders(len(kinds))})"
            args.extend(kinds)
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

    def stats(self, scopes: Sequence[str] | None = None) -> dict[str, Any]:
        """Counts by kind, scope and status, plus turns, edges and events.

        ``scopes``: count only the memories, turns and edges of these scopes (a
        project's view); the journal's count stays the namespace's (a number, no word).
        """
        ns = self.namespace
        where, args = "", [ns]
        if scopes is not None:
            where = f" AND scope IN ({placeholders(len(scopes))})"
            args += list(scopes)
        with self.db.read() as c:
            def one(sql: str, params: Sequence[Any] = args) -> int:
                return int(c.execute(sql, tuple(params)).fetchone()[0])

            def grouped(col: str) -> dict[str, int]:
                rows = c.execute(
                    f"SELECT {col}, count(*) FROM memories WHERE namespace = ?{where} "  # noqa: S608
                    f"GROUP BY {col}", tuple(args)).fetchall()
                return {str(k): int(v) for k, v in rows}

            return {
                "memories": one(f"SELECT count(*) FROM memories WHERE namespace = ?{where}"),  # noqa: S608
                "by_kind": grouped("kind"),
                "by_scope": grouped("scope"),
                "by_status": grouped("status"),
                "turns": one(f"SELECT count(*) FROM turns WHERE namespace = ?{where}"),  # noqa: S608
                "sessions": one(f"SELECT count(DISTINCT session) FROM turns "  # noqa: S608
                                f"WHERE namespace = ?{where}"),
                "edges": {str(k): int(v) for k, v in c.execute(
                    "SELECT e.type, count(*) FROM edges e JOIN memories m ON m.id = e.src "  # noqa: S608
                    f"WHERE m.namespace = ?{where.replace('scope', 'm.scope')} GROUP BY e.type",
                    tuple(args)).fetchall()},
                "events": one("SELECT count(*) FROM events WHERE namespace = ?", (ns,)),
            }

    def _df_cache_for(self, kind: str, total: int) -> dict[str, int]:
        """The document-frequency cache of one table, emptied when it went stale (older
        than ``_df_cache_seconds``, or the row count moved by more than 1 %)."""
        now = time.monotonic()
        cached = self._df_caches.get(kind)
        if (cached is None or now - cached[1] > self._df_cache_seconds
                or abs(total - cached[0]) > 0.01 * max(cached[0], 1)):
            cached = (total, now, {})
            self._df_caches[kind] = cached
        return cached[2]
