"""Sleep's reads of memory rows and its version-checked updates (dynamics, recurrence and
weight, source links).

Every update re-checks each row's ``version``: a row changed meanwhile by a write,
reflect or revise is left alone and counted as a conflict.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tideline.store.consolidation.state import CHUNK, SleepView, changed
from tideline.store.rows import MEMORY_COLUMNS, memory_from_row
from tideline.store.sql import placeholders as _ph

if TYPE_CHECKING:
    from tideline.models import MemoryRecord

__all__ = ["MemoryRows"]


class MemoryRows(SleepView):
    """Memory rows as the dynamics, recurrence and weight steps read and update them."""

    # -- memories: reads ----------------------------------------------------------------

    def live_count(self) -> int:
        """Memories that are not superseded."""
        with self.db.read() as c:
            row = c.execute("SELECT count(*) FROM memories WHERE namespace = ? AND "
                            "status != 'superseded'", (self.ns,)).fetchone()
        return int(row[0])

    def total_count(self) -> int:
        """Every memory row of the namespace."""
        with self.db.read() as c:
            row = c.execute("SELECT count(*) FROM memories WHERE namespace = ?",
                            (self.ns,)).fetchone()
        return int(row[0])

    def dynamics_rows(self) -> list[tuple[Any, ...]]:
        """(id, status, strength, stability, reinforcements, last_access, version) of live rows."""
        with self.db.read() as c:
            rows: list[tuple[Any, ...]] = c.execute(
                "SELECT id, status, strength, stability, reinforcements, last_access, version "
                "FROM memories WHERE namespace = ? AND status != 'superseded' ORDER BY id",
                (self.ns,)).fetchall()
        return rows

    def weight_rows(self) -> list[tuple[Any, ...]]:
        """(id, version, tags, importance, emotional, recurrence, unresolved, weight,
        recorded_at) of live rows."""
        with self.db.read() as c:
            rows: list[tuple[Any, ...]] = c.execute(
                "SELECT id, version, tags, importance, emotional, recurrence, unresolved, "
                "weight, recorded_at FROM memories WHERE namespace = ? "
                "AND status != 'superseded' ORDER BY id", (self.ns,)).fetchall()
        return rows

    def text_rows(self, after_id: int = 0) -> list[tuple[Any, ...]]:
        """(id, version, scope, gesture, context, cognition_direction, tags) of live rows."""
        with self.db.read() as c:
            rows: list[tuple[Any, ...]] = c.execute(
                "SELECT id, version, scope, gesture, context, cognition_direction, tags "
                "FROM memories WHERE namespace = ? AND status != 'superseded' AND id > ? "
                "ORDER BY id", (self.ns, after_id)).fetchall()
        return rows

    def max_memory_id(self) -> int:
        """Newest memory id of the namespace."""
        with self.db.read() as c:
            row = c.execute("SELECT max(id) FROM memories WHERE namespace = ?",
                            (self.ns,)).fetchone()
        return int(row[0] or 0)

    def memories(self, ids: Iterable[int]) -> dict[int, MemoryRecord]:
        """Full records by id (looked up by primary key)."""
        wanted = list(dict.fromkeys(int(i) for i in ids))
        out: dict[int, MemoryRecord] = {}
        with self.db.read() as c:
            for lo in range(0, len(wanted), CHUNK):
                chunk = wanted[lo:lo + CHUNK]
                # "namespace || ''": without statistics SQLite would walk a namespace
                # index (every row of the namespace) instead of the primary key; an
                # expression keeps it on the key (unary "+" does too, but only on SQLite).
                for row in c.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN "
                    f"({_ph(len(chunk))}) AND namespace || '' = ?", (*chunk, self.ns)).fetchall():
                    rec = memory_from_row(row)
                    out[rec.id] = rec
        return out

    # -- memories: version-checked updates ----------------------------------------------

    def set_dynamics(self, rows: Sequence[tuple[int, int, str, float, float, int, float]],
                     now: float) -> int:
        """Apply (id, version, status, stability, strength, reinforcements, last_access).

        Returns:
            Rows updated (a row whose version moved on is skipped).
        """
        with self.db.write() as c:
            cur = c.executemany(
                "UPDATE memories SET status = ?, stability = ?, strength = ?, reinforcements = ?,"
                " last_access = ?, version = version + 1, updated_at = ? "
                "WHERE id = ? AND namespace = ? AND version = ?",
                [(s, st, sr, rc, la, now, i, self.ns, v) for i, v, s, st, sr, rc, la in rows])
            return changed(cur)

    def set_weights(self, rows: Sequence[tuple[int, int, int, float]], now: float) -> int:
        """Apply (id, version, recurrence, weight); returns rows updated."""
        updated = 0
        for lo in range(0, len(rows), 20_000):
            with self.db.write() as c:
                updated += changed(c.executemany(
                    "UPDATE memories SET recurrence = ?, weight = ?, version = version + 1, "
                    "updated_at = ? WHERE id = ? AND namespace = ? AND version = ?",
                    [(r, w, now, i, self.ns, v) for i, v, r, w in rows[lo:lo + 20_000]]))
        return int(updated)

    def set_source_links(self, rows: Sequence[tuple[int, int, list[int]]], now: float) -> int:
        """Apply (id, version, links) to memories whose links are still empty."""
        with self.db.write() as c:
            cur = c.executemany(
                "UPDATE memories SET source_links = ?, version = version + 1, updated_at = ? "
                "WHERE id = ? AND namespace = ? AND version = ? AND source_links = '[]'",
                [(json.dumps(links), now, i, self.ns, v) for i, v, links in rows])
            return changed(cur)
