"""The SQL of the scan and backfill steps: memories that link no raw context yet, and the
raw turns they may link."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tideline.store.consolidation.state import SleepView
from tideline.store.rows import MEMORY_COLUMNS, TURN_COLUMNS, memory_from_row, turn_from_row

if TYPE_CHECKING:
    from tideline.models import MemoryRecord

__all__ = ["BackfillRows"]


class BackfillRows(SleepView):
    """Unlinked memories and the raw turns of one namespace, as scan and backfill read them."""

    # -- raw turns: scan and backfill ---------------------------------------------------

    def unlinked(self, *, limit: int | None = None, after_id: int = 0) -> list[MemoryRecord]:
        """Live memories with empty source_links (newest first when limited)."""
        sql = (f"SELECT {MEMORY_COLUMNS} FROM memories WHERE namespace = ? "
               "AND status != 'superseded' AND source_links = '[]' AND id > ?")
        args: list[Any] = [self.ns, after_id]
        if limit is not None:
            sql += " ORDER BY recorded_at DESC, id DESC LIMIT ?"
            args.append(limit)
        else:
            sql += " ORDER BY id"
        with self.db.read() as c:
            return [memory_from_row(r) for r in c.execute(sql, args).fetchall()]

    def solidified_cutoffs(self) -> dict[str, float]:
        """scope → record time of its newest memory that links raw context."""
        with self.db.read() as c:
            return {str(s): float(t) for s, t in c.execute(
                "SELECT scope, max(recorded_at) FROM memories WHERE namespace = ? AND "
                "source_links != '[]' GROUP BY scope", (self.ns,)).fetchall()}

    def linked_turn_ids(self) -> set[int]:
        """Every raw-turn id some memory links."""
        out: set[int] = set()
        with self.db.read() as c:
            for (raw,) in c.execute("SELECT source_links FROM memories WHERE namespace = ? AND "
                                    "source_links != '[]'", (self.ns,)):
                out.update(int(i) for i in json.loads(raw))
        return out

    def recent_turns(self, cutoffs: dict[str, float], limit: int) -> list[Any]:
        """The newest ``limit`` turns recorded after their scope's cutoff, oldest first."""
        with self.db.read() as c:
            rows = c.execute(
                f"SELECT {TURN_COLUMNS} FROM turns WHERE namespace = ? "
                "ORDER BY recorded_at DESC, id DESC LIMIT ?", (self.ns, limit * 4)).fetchall()
        turns = [turn_from_row(r) for r in rows]
        kept = [t for t in turns if t.recorded_at > cutoffs.get(t.scope, float("-inf"))]
        kept = kept[:limit]
        kept.sort(key=lambda t: (t.timestamp if t.timestamp is not None else t.recorded_at, t.id))
        return kept

    def turn_times(self, scope: str, lo: float, hi: float,
                   after_id: int = 0) -> list[tuple[int, float, str]]:
        """(turn id, time, text) of a scope's turns with time in [lo, hi], id > after_id."""
        with self.db.read() as c:
            return [(int(i), float(t), str(x)) for i, t, x in c.execute(
                "SELECT id, coalesce(ts, recorded_at) AS tt, text FROM turns WHERE namespace = ?"
                " AND scope = ? AND id > ? AND coalesce(ts, recorded_at) BETWEEN ? AND ? "
                "ORDER BY tt", (self.ns, scope, after_id, lo, hi)).fetchall()]

    def max_turn_id(self) -> int:
        """Newest turn id of the namespace."""
        with self.db.read() as c:
            row = c.execute("SELECT max(id) FROM turns WHERE namespace = ?", (self.ns,)).fetchone()
        return int(row[0] or 0)

    # -- retention snapshots ------------------------------------------------------------

    def add_snapshot(self, snap: dict[str, Any], now: float) -> None:
        """Record one retention snapshot."""
        with self.db.write() as c:
            c.execute(
                "INSERT INTO retention_snapshots(namespace, ts, memories, mean, p10, p50, p90, "
                "by_status, histogram) VALUES (?,?,?,?,?,?,?,?,?)",
                (self.ns, now, snap["memories"], snap["mean"], snap["p10"], snap["p50"],
                 snap["p90"], json.dumps(snap["by_status"]), json.dumps(snap["histogram"])))

    def snapshots(self, limit: int = 200) -> list[dict[str, Any]]:
        """Retention snapshots, oldest first (the newest ``limit``)."""
        with self.db.read() as c:
            rows = c.execute(
                "SELECT ts, memories, mean, p10, p50, p90, by_status, histogram FROM "
                "retention_snapshots WHERE namespace = ? ORDER BY ts DESC LIMIT ?",
                (self.ns, limit)).fetchall()
        return [{"ts": t, "memories": n, "mean": m, "p10": a, "p50": b, "p90": d,
                 "by_status": json.loads(s), "histogram": json.loads(h)}
                for t, n, m, a, b, d, s, h in reversed(rows)]
