"""The reads and checks the DREAM layer needs beyond the core store.

Reads run outside any transaction (planning); the ``*_in`` methods take the
caller's write transaction so that apply re-checks versions in the same
transaction that writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tideline.models import MemoryRecord
from tideline.store.database import Connection
from tideline.store.rows import MEMORY_COLUMNS, memory_from_row
from tideline.store.sql import placeholders as _ph
from tideline.store.view import NamespaceView

__all__ = ["DreamStore"]

_LIVE = "status != 'superseded'"


class DreamStore(NamespaceView):
    """Dream-specific SQL over one namespace of a :class:`SQLiteStore`."""

    def _where(self, scopes: Sequence[str] | None, exclude_kinds: Sequence[str],
               alias: str = "") -> tuple[list[str], list[Any]]:
        p = f"{alias}." if alias else ""
        where = [f"{p}namespace = ?", f"{p}{_LIVE}"]
        args: list[Any] = [self.ns]
        if scopes is not None:
            where.append(f"{p}scope IN ({_ph(len(scopes))})")
            args.extend(scopes)
        if exclude_kinds:
            where.append(f"{p}kind NOT IN ({_ph(len(exclude_kinds))})")
            args.extend(exclude_kinds)
        return where, args

    def _select(self, where: list[str], args: list[Any], order: str,
                limit: int) -> list[MemoryRecord]:
        sql = (f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {' AND '.join(where)} "
               f"ORDER BY {order} LIMIT ?")
        with self.store.db.read() as c:
            rows = c.execute(sql, (*args, limit)).fetchall()
        return [memory_from_row(r) for r in rows]

    def live_count(self, scopes: Sequence[str] | None = None) -> int:
        """How many memories are not superseded."""
        where, args = self._where(scopes, ())
        with self.store.db.read() as c:
            row = c.execute(f"SELECT count(*) FROM memories WHERE {' AND '.join(where)}",
                            args).fetchone()
        return int(row[0])

    def recent(self, since: float, *, scopes: Sequence[str] | None, limit: int,
               exclude_kinds: Sequence[str] = ()) -> list[MemoryRecord]:
        """Live memories recorded or changed since ``since``, newest first."""
        where, args = self._where(scopes, exclude_kinds)
        where.append("(recorded_at > ? OR updated_at > ?)")
        args += [since, since]
        return self._select(where, args, "recorded_at DESC, id DESC", limit)

    def heaviest(self, *, scopes: Sequence[str] | None, limit: int,
                 exclude_kinds: Sequence[str] = (), exclude_ids: Iterable[int] = (),
                 min_unresolved: int | None = None) -> list[MemoryRecord]:
        """Live, non-dormant memories by weight (optionally only the unresolved ones)."""
        where, args = self._where(scopes, exclude_kinds)
        where.append("status != 'dormant'")
        skip = list(exclude_ids)[:900]
        if skip:
            where.append(f"id NOT IN ({_ph(len(skip))})")
            args.extend(skip)
        if min_unresolved is not None:
            where.append("unresolved >= ?")
            args.append(min_unresolved)
        return self._select(where, args, "weight DESC, id DESC", limit)

    def by_kind(self, kind: str, *, scopes: Sequence[str] | None,
                limit: int) -> list[MemoryRecord]:
        """The newest live memories of one kind."""
        where, args = self._where(scopes, ())
        where.append("kind = ?")
        args.append(kind)
        return self._select(where, args, "recorded_at DESC, id DESC", limit)

    def live_ids(self, *, scopes: Sequence[str] | None, limit: int,
                 exclude_kinds: Sequence[str] = ()) -> list[int]:
        """Ids of live memories, oldest first."""
        where, args = self._where(scopes, exclude_kinds)
        sql = f"SELECT id FROM memories WHERE {' AND '.join(where)} ORDER BY id LIMIT ?"
        with self.store.db.read() as c:
            return [int(r[0]) for r in c.execute(sql, (*args, limit)).fetchall()]

    def attention(self, since: float, ids: Sequence[int] | None = None,
                  limit: int = 20, scopes: Sequence[str] | None = None) -> dict[int, int]:
        """Recall hits per memory since ``since`` (of ``ids``, or the most recalled ones),
        counting only memories of ``scopes`` when given."""
        sql = ("SELECT memory_id, count(*) AS n FROM attention_log WHERE namespace = ? "
               "AND ts >= ?")
        args: list[Any] = [self.ns, since]
        if scopes is not None:
            inner = f"SELECT id FROM memories WHERE namespace = ? AND scope IN ({_ph(len(scopes))})"  # noqa: E501
            sql += f" AND memory_id IN ({inner})"
            args.extend([self.ns, *scopes])
        if ids is not None:
            chosen = list(ids)[:900]
            if not chosen:
                return {}
            sql += f" AND memory_id IN ({_ph(len(chosen))})"
            args.extend(chosen)
        sql += " GROUP BY memory_id ORDER BY n DESC, memory_id LIMIT ?"
        with self.store.db.read() as c:
            rows = c.execute(sql, (*args, limit)).fetchall()
        return {int(m): int(n) for m, n in rows}

    def quiet_ids(self, since: float, *, scopes: Sequence[str] | None, limit: int,
                  exclude_kinds: Sequence[str] = ()) -> list[int]:
        """Live memories never recalled since ``since`` (oldest access first)."""
        where, args = self._where(scopes, exclude_kinds, alias="m")
        sql = (f"SELECT m.id FROM memories m WHERE {' AND '.join(where)} AND NOT EXISTS "
               "(SELECT 1 FROM attention_log a WHERE a.namespace = m.namespace AND "
               "a.memory_id = m.id AND a.ts >= ?) ORDER BY m.last_access, m.id LIMIT ?")
        with self.store.db.read() as c:
            return [int(r[0]) for r in c.execute(sql, (*args, since, limit)).fetchall()]

    def last_applied(self, layer: str) -> float | None:
        """When ``layer`` was last applied for real (not a dry run)."""
        d = self.store.db.dialect
        with self.store.db.read() as c:
            row = c.execute(
                "SELECT max(ts) FROM events WHERE namespace = ? AND kind = 'dream_apply' "
                f"AND {d.json_text('data', 'layer')} = ? "
                f"AND NOT ({d.json_flag('data', 'dry_run')})",
                (self.ns, layer)).fetchone()
        return None if row[0] is None else float(row[0])

    def wander_seeds(self, since: float) -> set[int]:
        """Memories that seeded a wander since ``since``."""
        d = self.store.db.dialect
        with self.store.db.read() as c:
            rows = c.execute(
                f"SELECT {d.json_number('data', 'seed')} FROM events WHERE namespace = ? "
                f"AND kind = 'dream_apply' AND ts >= ? AND {d.json_text('data', 'layer')} = "
                "'wander'", (self.ns, since)).fetchall()
        return {int(r[0]) for r in rows if r[0] is not None}

    # -- inside the apply transaction -----------------------------------------------------

    def facet_version_in(self, c: Connection, entity: str | None, facet: str) -> int:
        """Current version of a profile facet (``entity`` given) or self-concept facet; 0 if new."""
        if entity is None:
            row = c.execute("SELECT version FROM self_concept WHERE namespace = ? AND facet = ?",
                            (self.ns, facet)).fetchone()
        else:
            row = c.execute("SELECT version FROM profiles WHERE namespace = ? AND entity = ? "
                            "AND facet = ?", (self.ns, entity, facet)).fetchone()
        return int(row[0]) if row else 0

    def facet_versions(self) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
        """Versions of every profile facet and self-concept facet."""
        with self.store.db.read() as c:
            prof = c.execute("SELECT entity, facet, version FROM profiles WHERE namespace = ?",
                             (self.ns,)).fetchall()
            selfc = c.execute("SELECT facet, version FROM self_concept WHERE namespace = ?",
                              (self.ns,)).fetchall()
        return ({(str(e), str(f)): int(v) for e, f, v in prof},
                {str(f): int(v) for f, v in selfc})

    def has_edge_in(self, c: Connection, src: int, dst: int, etype: str) -> bool:
        """Whether the typed edge exists (either direction for symmetric types)."""
        row = c.execute("SELECT 1 FROM edges WHERE type = ? AND ((src = ? AND dst = ?) OR "
                        "(src = ? AND dst = ?))", (etype, src, dst, dst, src)).fetchone()
        return row is not None

    def thread_titles(self) -> set[str]:
        """Titles of open threads (casefolded), to avoid opening one twice."""
        with self.store.db.read() as c:
            rows = c.execute("SELECT title FROM threads WHERE namespace = ? AND status = 'open'",
                             (self.ns,)).fetchall()
        return {str(r[0]).casefold() for r in rows}

    # -- solidify bookkeeping -------------------------------------------------------------

    def reviewed_turns(self, since: float) -> set[int]:
        """Turns an applied solidify judged not worth keeping since ``since``."""
        d = self.store.db.dialect
        with self.store.db.read() as c:
            rows = c.execute(
                "SELECT DISTINCT j.value FROM events e, "
                f"{d.json_items(d.json_text('e.data', 'skipped_turns'), 'j')} "
                "WHERE e.namespace = ? AND e.kind = 'dream_apply' AND e.ts >= ? "
                f"AND {d.json_text('e.data', 'layer')} = 'solidify'", (self.ns, since)).fetchall()
        return {int(r[0]) for r in rows}
