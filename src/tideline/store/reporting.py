"""SQL of the report: journal time series, growth, reinforcement, associations, hooks, dream cost.

Read-only. Time series are bucketed by whole days counted from the start of the
report's window (``day`` 0 is its first day; negative days are before it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tideline.store.sql import placeholders as _ph
from tideline.store.view import NamespaceView

__all__ = ["ReportStore"]

_DAY = 86_400.0


class ReportStore(NamespaceView):
    """The report's queries over one namespace.

    Args:
        store: the opened SQLite store.
    """

    def growth(self, since: float,
               scopes: Sequence[str] | None = None) -> list[tuple[str, int, int]]:
        """(kind, day, memories recorded that day) — day < 0 folded into -1 (of
        ``scopes`` only, if given)."""
        where = "" if scopes is None else f" AND scope IN ({_ph(len(scopes))})"
        with self.db.read() as c:
            rows = c.execute(
                "SELECT kind, CASE WHEN recorded_at < ? THEN -1 ELSE "
                f"{self.db.dialect.whole('(recorded_at - ?) / ?')} END AS d, count(*) "
                f"FROM memories WHERE namespace = ?{where} GROUP BY kind, d",
                (since, since, _DAY, self.ns, *(scopes or ()))).fetchall()
        out: dict[tuple[str, int], int] = {}
        for kind, day, n in rows:
            key = (str(kind), max(-1, int(day)))
            out[key] = out.get(key, 0) + int(n)
        return [(k, d, n) for (k, d), n in sorted(out.items())]

    def gate_decisions(self, since: float) -> list[tuple[int, str, int]]:
        """(day, decision, writes) of the write events in the window."""
        with self.db.read() as c:
            rows = c.execute(
                f"SELECT {self.db.dialect.whole('(ts - ?) / ?')} AS d, "
                f"{self.db.dialect.json_text('data', 'decision')} AS dec, count(*) FROM events "
                "WHERE namespace = ? AND kind = 'write' "
                "AND ts >= ? GROUP BY d, dec ORDER BY d", (since, _DAY, self.ns, since)
            ).fetchall()
        return [(int(d), str(dec or "unknown"), int(n)) for d, dec, n in rows]

    def recalls(self, since: float) -> list[tuple[int, float, bool, str]]:
        """(day, latency ms, abstained, tier) of every recall in the window."""
        d = self.db.dialect
        with self.db.read() as c:
            rows = c.execute(
                f"SELECT {d.whole('(ts - ?) / ?')}, {d.json_number('data', 'latency_ms')}, "
                f"{d.json_number('data', 'abstained')}, {d.json_text('data', 'tier')} FROM events "
                "WHERE namespace = ? AND kind = 'recall' AND ts >= ?",
                (since, _DAY, self.ns, since)).fetchall()
        return [(int(d), float(lat or 0.0), bool(ab), str(tier or "")) for d, lat, ab, tier in rows]

    def reflects(self, since: float) -> list[tuple[float, list[int], float]]:
        """(ts, ids, reward) of reflect events in the window."""
        with self.db.read() as c:
            rows = c.execute("SELECT ts, data FROM events WHERE namespace = ? AND kind = 'reflect'"
                             " AND ts >= ? ORDER BY ts", (self.ns, since)).fetchall()
        out = []
        for ts, raw in rows:
            data = json.loads(raw)
            out.append((float(ts), [int(i) for i in data.get("ids", [])],
                        float(data.get("reward", 0.0))))
        return out

    def potentiated(self, since: float) -> dict[int, int]:
        """memory id → how often the novelty gate potentiated it in the window."""
        with self.db.read() as c:
            rows = c.execute(
                "SELECT memory_id, count(*) FROM events WHERE namespace = ? AND kind = 'write' "
                f"AND ts >= ? AND {self.db.dialect.json_text('data', 'decision')} = 'potentiate' "
                "GROUP BY memory_id", (self.ns, since)).fetchall()
        return {int(m): int(n) for m, n in rows if m is not None}

    def updates_edges(self, since: float) -> list[tuple[int, int, float, str, str]]:
        """The ``updates`` edges made since ``since``, newest first: (new id, old id,
        created at, new gesture, old gesture) — the gate's corrections."""
        with self.db.read() as c:
            rows = c.execute(
                "SELECT e.src, e.dst, e.created_at, n.gesture, o.gesture FROM edges e "
                "JOIN memories n ON n.id = e.src JOIN memories o ON o.id = e.dst "
                "WHERE e.type = 'updates' AND n.namespace = ? AND e.created_at >= ? "
                "ORDER BY e.created_at DESC, e.src DESC", (self.ns, since)).fetchall()
        return [(int(a), int(b), float(t), str(n), str(o)) for a, b, t, n, o in rows]

    def event_counts(self, since: float) -> dict[str, int]:
        """Events per kind in the window."""
        with self.db.read() as c:
            rows = c.execute("SELECT kind, count(*) FROM events WHERE namespace = ? AND ts >= ? "
                             "GROUP BY kind", (self.ns, since)).fetchall()
        return {str(k): int(n) for k, n in rows}

    def events_of(self, kind: str, *, since: float | None = None,
                  limit: int = 50) -> list[dict[str, Any]]:
        """The newest events of one kind (data parsed), newest first."""
        return self.store.events(kinds=[kind], limit=limit, since=since)

    def token_cost(self, since: float | None) -> dict[str, int]:
        """Calls and summed ``tokens_in``/``tokens_out`` of ``dream_call`` events."""
        d = self.db.dialect
        sql = (f"SELECT count(*), coalesce(sum({d.json_number('data', 'tokens_in')}), 0), "
               f"coalesce(sum({d.json_number('data', 'tokens_out')}), 0) FROM events "
               "WHERE namespace = ? AND kind = 'dream_call'")
        args: list[Any] = [self.ns]
        if since is not None:
            sql += " AND ts >= ?"
            args.append(since)
        with self.db.read() as c:
            n, tin, tout = c.execute(sql, args).fetchone()
        return {"calls": int(n), "tokens_in": int(tin or 0), "tokens_out": int(tout or 0)}

    def strongest_associations(self, limit: int) -> list[tuple[int, int, float]]:
        """The heaviest co_recall edges (src, dst, weight)."""
        with self.db.read() as c:
            rows = c.execute(
                "SELECT e.src, e.dst, e.weight FROM edges e JOIN memories m ON m.id = e.src "
                "WHERE m.namespace = ? AND e.type = 'co_recall' ORDER BY e.weight DESC, "
                "e.src, e.dst LIMIT ?", (self.ns, limit)).fetchall()
        return [(int(a), int(b), float(w)) for a, b, w in rows]

    def most_reinforced(self, limit: int) -> list[int]:
        """Ids of live memories with the most reinforcements."""
        with self.db.read() as c:
            rows = c.execute(
                "SELECT id FROM memories WHERE namespace = ? AND status != 'superseded' "
                "AND reinforcements > 0 ORDER BY reinforcements DESC, last_access DESC LIMIT ?",
                (self.ns, limit)).fetchall()
        return [int(r[0]) for r in rows]

    def unlinked_count(self) -> int:
        """Live memories with empty source_links."""
        with self.db.read() as c:
            row = c.execute("SELECT count(*) FROM memories WHERE namespace = ? AND "
                            "status != 'superseded' AND source_links = '[]'",
                            (self.ns,)).fetchone()
        return int(row[0])

    def attention_by_tag(self, scopes: Sequence[str] | None, since: float | None,
                         limit: int = 25) -> dict[str, Any]:
        """Which tags (and memories) recall lights up and which stay dark, from
        ``attention_log``: the attention heatmap's grouping before sleep has built
        clusters (see :func:`tideline.sleep.attention.heatmap`).

        Args:
            scopes: memories of these scopes only; None for every scope.
            since: hits at or after this time (None: all).
            limit: how many groups and memories to list.
        """
        ns = self.ns
        t0 = since if since is not None else 0.0
        if scopes is None:
            with self.db.read() as c:
                scopes = [str(r[0]) for r in c.execute(
                    "SELECT DISTINCT scope FROM memories WHERE namespace = ?", (ns,))]
        scopes = list(scopes) or [""]  # no scope: an IN list that matches nothing
        with self.db.read() as c:
            by_tier = dict(c.execute(
                "SELECT tier, count(*) FROM attention_log WHERE namespace = ? AND ts >= ? "
                "GROUP BY tier", (ns, t0)).fetchall())
            mem_rows = c.execute(
                f"SELECT m.id, count(*) AS n, avg(a.similarity), max(a.ts), m.gesture, "
                f"m.tags, m.scope FROM attention_log a JOIN memories m ON m.id = a.memory_id "
                f"WHERE a.namespace = ? AND a.ts >= ? AND m.scope IN ({_ph(len(scopes))}) "
                "GROUP BY m.id ORDER BY n DESC", (ns, t0, *scopes)).fetchall()
            cluster_rows = c.execute(
                "SELECT cluster, count(*) FROM attention_log WHERE namespace = ? AND ts >= ? "
                "AND cluster IS NOT NULL GROUP BY cluster ORDER BY count(*) DESC",
                (ns, t0)).fetchall()
            all_tags = c.execute(
                f"SELECT j.value, count(*) FROM memories m, "
                f"{self.db.dialect.json_items('m.tags', 'j')} "
                f"WHERE m.namespace = ? AND m.scope IN ({_ph(len(scopes))}) "
                "AND m.status != 'superseded' GROUP BY j.value", (ns, *scopes)).fetchall()
            dark = c.execute(
                f"SELECT count(*) FROM memories m WHERE m.namespace = ? "
                f"AND m.scope IN ({_ph(len(scopes))}) AND m.status != 'superseded' AND NOT EXISTS "
                "(SELECT 1 FROM attention_log a WHERE a.namespace = m.namespace "
                "AND a.memory_id = m.id AND a.ts >= ?)", (ns, *scopes, t0)).fetchone()[0]
        lit_tags: dict[str, int] = {}
        for row in mem_rows:
            for tag in json.loads(row[5] or "[]"):
                lit_tags[tag] = lit_tags.get(tag, 0) + int(row[1])
        size = {str(t): int(n) for t, n in all_tags}
        ranked = sorted(size.items(), key=lambda kv: (-lit_tags.get(kv[0], 0), kv[0]))
        groups = [{"label": t, "hits": lit_tags.get(t, 0), "memories": n} for t, n in ranked]
        return {
            "grouping": "cluster" if cluster_rows else "tag",
            "since": since,
            "by_tier": {str(k): int(v) for k, v in by_tier.items()},
            "hits": sum(int(v) for v in by_tier.values()),
            "lit": [g for g in groups if g["hits"]][:limit],
            "deserts": [g for g in groups if not g["hits"]][:limit],
            "clusters": [{"cluster": int(k), "hits": int(n)} for k, n in cluster_rows][:limit],
            "memories": [{"id": r[0], "hits": int(r[1]), "mean_similarity": round(r[2] or 0, 4),
                          "last_hit": r[3], "gesture": r[4], "scope": r[6]}
                         for r in mem_rows[:limit]],
            "dark_memories": int(dark),
        }
