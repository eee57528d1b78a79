"""Reads for a person browsing one namespace: pages of memories, days of sessions, the journal.

Every list is one page read from the database in an order an index serves (keyset
pagination: "older than this id" / "before this time", never an ``OFFSET`` over a
whole table), so a page costs the same at 100k memories and 500k turns as at ten.
Scopes are always explicit: ``scopes=None`` means every scope of the namespace (the
UI's "all projects", a deliberate choice), otherwise only those listed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tideline.models import MemoryRecord, Turn
from tideline.store.rows import MEMORY_COLUMNS, TURN_COLUMNS, memory_from_row, turn_from_row
from tideline.store.sql import placeholders
from tideline.store.view import NamespaceView

__all__ = ["CONFLICT_EDGES", "BrowseStore"]

#: Edge types that pair two memories a person should look at side by side:
#: ``updates`` (the write gate's corrections) and ``contradicts`` (DREAM's comb).
CONFLICT_EDGES = ("updates", "contradicts")

#: How far after a session's last turn a memory recorded from it is looked for.
LINK_WINDOW_S = 30 * 86400.0
#: The most memories read when looking for those linking to a page of turns.
LINK_SCAN = 5000


def _scope_filter(scopes: Sequence[str] | None, alias: str = "") -> tuple[str, list[Any]]:
    if scopes is None:
        return "", []
    p = f"{alias}." if alias else ""
    return f" AND {p}scope IN ({placeholders(len(scopes))})", list(scopes)


class BrowseStore(NamespaceView):
    """Paged, index-served reads over one namespace for the local web app."""

    def memories(self, *, scopes: Sequence[str] | None, kind: str | None = None,
                 status: str | None = None, before_id: int | None = None,
                 limit: int = 50) -> list[MemoryRecord]:
        """Memories newest first (by id), one page older than ``before_id``."""
        where, args = _scope_filter(scopes)
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories WHERE namespace = ?{where}"
        params: list[Any] = [self.ns, *args]
        if kind:
            sql += " AND kind = ?"
            params.append(kind)
        if status:
            sql += " AND status = ?"
            params.append(status)
        if before_id is not None:
            sql += " AND id < ?"
            params.append(before_id)
        sql += " ORDER BY id DESC LIMIT ?"
        with self.db.read() as c:
            rows = c.execute(sql, (*params, limit)).fetchall()
        return [memory_from_row(r) for r in rows]

    def memory(self, mid: int) -> MemoryRecord | None:
        """One memory of this namespace by id (any scope), or None."""
        with self.db.read() as c:
            row = c.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE namespace = ? "
                            "AND id = ?", (self.ns, mid)).fetchone()
        return memory_from_row(row) if row else None

    def memories_by_id(self, ids: Sequence[int]) -> dict[int, MemoryRecord]:
        """Memories of this namespace by id (any scope; at most the first 500 ids)."""
        wanted = sorted({int(i) for i in ids})[:500]
        if not wanted:
            return {}
        with self.db.read() as c:
            rows = c.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE namespace = ? "
                             f"AND id IN ({placeholders(len(wanted))})",
                             (self.ns, *wanted)).fetchall()
        return {rec.id: rec for rec in map(memory_from_row, rows)}

    def turn(self, tid: int) -> Turn | None:
        """One raw turn of this namespace by id (any scope), or None."""
        with self.db.read() as c:
            row = c.execute(f"SELECT {TURN_COLUMNS} FROM turns WHERE namespace = ? AND id = ?",
                            (self.ns, tid)).fetchone()
        return turn_from_row(row) if row else None

    def last_turn_time(self, scopes: Sequence[str] | None, before: float) -> float | None:
        """The newest turn time strictly before ``before`` (to page back one day)."""
        return self._edge_time(scopes, "ts < ?", "DESC", before, max)

    def first_turn_time(self, scopes: Sequence[str] | None, after: float) -> float | None:
        """The oldest turn time at or after ``after`` (to page forward one day)."""
        return self._edge_time(scopes, "ts >= ?", "ASC", after, min)

    def _edge_time(self, scopes: Sequence[str] | None, cond: str, order: str, bound: float,
                   pick: Any) -> float | None:
        # One index probe per scope (turns_ts: namespace, scope, ts): an IN list or no
        # scope at all would make the database walk every turn before the bound.
        names = list(scopes) if scopes is not None else self.turn_scopes()
        found = []
        with self.db.read() as c:
            for scope in names:
                row = c.execute(f"SELECT ts FROM turns WHERE namespace = ? AND scope = ? "
                                f"AND ts IS NOT NULL AND {cond} ORDER BY ts {order} LIMIT 1",
                                (self.ns, scope, bound)).fetchone()
                if row is not None:
                    found.append(float(row[0]))
        return pick(found) if found else None

    def turn_scopes(self) -> list[str]:
        """The scopes that hold turns: a skip over the ``turns_ts`` index (one probe per
        scope, however many turns there are)."""
        sql = ("WITH RECURSIVE k(scope) AS (SELECT min(scope) FROM turns WHERE namespace = ? "
               "UNION ALL SELECT (SELECT min(scope) FROM turns WHERE namespace = ? "
               "AND scope > k.scope) FROM k WHERE k.scope IS NOT NULL) "
               "SELECT scope FROM k WHERE scope IS NOT NULL")
        with self.db.read() as c:
            rows = c.execute(sql, (self.ns, self.ns)).fetchall()
        return sorted(str(r[0]) for r in rows)

    def sessions_between(self, scopes: Sequence[str], start: float, end: float,
                         limit: int = 200) -> list[dict[str, Any]]:
        """Sessions with turns stamped in ``[start, end)``: first/last time, turn count.

        One read per scope over the ``turns_ts`` index (namespace, scope, ts): the ordered
        subquery keeps the planner on it rather than walking a whole namespace in
        session order to group.
        """
        found: dict[str, dict[str, Any]] = {}
        with self.db.read() as c:
            for scope in scopes:
                rows = c.execute(
                    "SELECT session, min(ts), max(ts), count(*) FROM (SELECT session, ts "
                    "FROM turns WHERE namespace = ? AND scope = ? AND ts >= ? AND ts < ? "
                    "ORDER BY ts) AS day GROUP BY session", (self.ns, scope, start, end)
                ).fetchall()
                for name, first, last, n in rows:
                    had = found.setdefault(str(name), {"session": str(name), "scope": scope,
                                                       "first": float(first),
                                                       "last": float(last), "turns": 0})
                    had["first"] = min(had["first"], float(first))
                    had["last"] = max(had["last"], float(last))
                    had["turns"] += int(n)
        return sorted(found.values(), key=lambda r: -r["first"])[:limit]

    def session_turns(self, session: str, *, scopes: Sequence[str] | None,
                      from_index: int = 0, limit: int = 100) -> list[Turn]:
        """One page of a session's turns in order, from ``from_index`` on."""
        where, args = _scope_filter(scopes)
        sql = (f"SELECT {TURN_COLUMNS} FROM turns WHERE namespace = ? AND session = ?{where} "
               "AND turn_index >= ? ORDER BY turn_index LIMIT ?")
        with self.db.read() as c:
            rows = c.execute(sql, (self.ns, session, *args, from_index, limit)).fetchall()
        return [turn_from_row(r) for r in rows]

    def linking(self, turns: Sequence[Turn], *,
                scopes: Sequence[str] | None) -> dict[int, list[MemoryRecord]]:
        """Memories whose ``source_links`` name one of ``turns`` (turn id → memories).

        Memories are looked for among those recorded from the first turn's time up to
        :data:`LINK_WINDOW_S` after the last (the ``memories_recorded`` index), at most
        :data:`LINK_SCAN` of them: a memory derived from a conversation is recorded
        after it, and no page reads the whole table.
        """
        wanted = {t.id for t in turns}
        times = [t.timestamp if t.timestamp is not None else t.recorded_at for t in turns]
        if not wanted or not times:
            return {}
        where, args = _scope_filter(scopes)
        sql = (f"SELECT {MEMORY_COLUMNS} FROM memories WHERE namespace = ?{where} "
               "AND recorded_at >= ? AND recorded_at <= ? AND source_links != '[]' "
               "ORDER BY recorded_at LIMIT ?")
        lo, hi = min(times) - 60.0, max(max(times), max(t.recorded_at for t in turns))
        with self.db.read() as c:
            rows = c.execute(sql, (self.ns, *args, lo, hi + LINK_WINDOW_S,
                                   LINK_SCAN)).fetchall()
        out: dict[int, list[MemoryRecord]] = {}
        for row in rows:
            rec = memory_from_row(row)
            for tid in set(rec.source_links) & wanted:
                out.setdefault(tid, []).append(rec)
        return out

    def events(self, *, kinds: Sequence[str] | None = None, memory_id: int | None = None,
               before_id: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Journal entries newest first, one page older than ``before_id``.

        With kinds: one read per kind down the ``events_kind`` index (namespace, kind, ts)
        from the cursor, merged. Without: the newest rows by id, walked back until the
        page is full (``namespace || ''`` keeps the planner off the kind index, which
        would sort the whole namespace). A memory filter without kinds walks back the
        same way until it has found a page (no index holds memory ids).
        """
        cols = "SELECT id, ts, kind, memory_id, data FROM events"
        cursor: tuple[float, int] | None = None
        with self.db.read() as c:
            if before_id is not None:
                row = c.execute("SELECT ts FROM events WHERE id = ?", (before_id,)).fetchone()
                cursor = (float(row[0]) if row else float("inf"), before_id)
            rows: list[Any] = []
            if kinds:
                for kind in dict.fromkeys(kinds):
                    sql = f"{cols} WHERE namespace = ? AND kind = ?"
                    args: list[Any] = [self.ns, kind]
                    if memory_id is not None:
                        sql += " AND memory_id = ?"
                        args.append(memory_id)
                    if cursor is not None:
                        sql += " AND (ts < ? OR (ts = ? AND id < ?))"
                        args += [cursor[0], cursor[0], cursor[1]]
                    rows += c.execute(sql + " ORDER BY ts DESC, id DESC LIMIT ?",
                                      (*args, limit)).fetchall()
                rows.sort(key=lambda r: (-float(r[1]), -int(r[0])))
            else:
                sql = f"{cols} WHERE namespace || '' = ?"
                args = [self.ns]
                if memory_id is not None:
                    sql += " AND memory_id = ?"
                    args.append(memory_id)
                if before_id is not None:
                    sql += " AND id < ?"
                    args.append(before_id)
                rows = c.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
        return [{"id": int(r[0]), "ts": float(r[1]), "kind": str(r[2]), "memory_id": r[3],
                 "data": json.loads(r[4])} for r in rows[:limit]]

    def event_kinds(self) -> list[str]:
        """The kinds of event the journal holds: a skip over the ``events_kind`` index
        (one probe per kind, however many events there are)."""
        sql = ("WITH RECURSIVE k(kind) AS (SELECT min(kind) FROM events WHERE namespace = ? "
               "UNION ALL SELECT (SELECT min(kind) FROM events WHERE namespace = ? "
               "AND kind > k.kind) FROM k WHERE k.kind IS NOT NULL) "
               "SELECT kind FROM k WHERE kind IS NOT NULL")
        with self.db.read() as c:
            rows = c.execute(sql, (self.ns, self.ns)).fetchall()
        return sorted(str(r[0]) for r in rows)

    def conflict_edges(self, *, before: tuple[float, int, int] | None = None,
                       limit: int = 50) -> list[dict[str, Any]]:
        """Edges of :data:`CONFLICT_EDGES` kinds between two memories of this namespace,
        newest first, whose both ends are still live (neither superseded)."""
        sql = ("SELECT e.src, e.dst, e.type, e.weight, e.created_at FROM edges e "
               "JOIN memories a ON a.id = e.src JOIN memories b ON b.id = e.dst "
               f"WHERE e.type IN ({placeholders(len(CONFLICT_EDGES))}) "
               "AND a.namespace = ? AND b.namespace = ? "
               "AND a.status != 'superseded' AND b.status != 'superseded'")
        args: list[Any] = [*CONFLICT_EDGES, self.ns, self.ns]
        if before is not None:
            sql += " AND (e.created_at < ? OR (e.created_at = ? AND e.src < ?))"
            args += [before[0], before[0], before[1]]
        sql += " ORDER BY e.created_at DESC, e.src DESC LIMIT ?"
        with self.db.read() as c:
            rows = c.execute(sql, (*args, limit)).fetchall()
        return [{"src": int(r[0]), "dst": int(r[1]), "type": str(r[2]),
                 "weight": float(r[3]), "created_at": float(r[4])} for r in rows]

    def has_edge_in(self, c: Any, src: int, dst: int, etype: str) -> bool:
        """Inside the caller's transaction: whether the typed edge exists."""
        row = c.execute("SELECT 1 FROM edges WHERE src = ? AND dst = ? AND type = ?",
                        (src, dst, etype)).fetchone()
        return row is not None

    def drop_edge_in(self, c: Any, src: int, dst: int, etype: str) -> None:
        """Inside the caller's transaction: delete one typed edge."""
        c.execute("DELETE FROM edges WHERE src = ? AND dst = ? AND type = ?", (src, dst, etype))
