"""The SQL of plasticity: the recall traces it learns from (attention, eligibility,
reflect rewards) and the ``co_recall`` edges it writes, decays and prunes."""

from __future__ import annotations

import json
from collections.abc import Iterable

from tideline.store.consolidation.state import CHUNK, SleepView, changed
from tideline.store.sql import placeholders as _ph

__all__ = ["PlasticityRows"]


class PlasticityRows(SleepView):
    """Recall traces and ``co_recall`` edges of one namespace."""

    # -- recall traces ------------------------------------------------------------------

    def attention_since(self, cursor: int) -> list[tuple[int, int, float]]:
        """(attention row id, memory id, ts) after ``cursor``."""
        with self.db.read() as c:
            return [(int(a), int(b), float(t)) for a, b, t in c.execute(
                "SELECT id, memory_id, ts FROM attention_log WHERE namespace = ? AND id > ? "
                "ORDER BY id", (self.ns, cursor)).fetchall()]

    def eligibility(self) -> list[tuple[int, int, int, int, float, float, str | None]]:
        """(row id, recall id, memory id, rank, score, ts, recall scope), oldest first."""
        with self.db.read() as c:
            rows = c.execute(
                "SELECT e.id, e.recall_id, e.memory_id, e.rank, e.score, e.ts, "
                f"{self.db.dialect.json_text('ev.data', 'scope')} FROM eligibility e "
                "LEFT JOIN events ev ON ev.id = e.recall_id "
                "WHERE e.namespace = ? ORDER BY e.ts, e.recall_id, e.rank", (self.ns,)).fetchall()
        return [(int(a), int(b), int(m), int(r), float(s), float(t), sc)
                for a, b, m, r, s, t, sc in rows]

    def reflects_since(self, ts: float) -> list[tuple[float, list[int], float]]:
        """(ts, ids, reward) of reflect events at or after ``ts``."""
        with self.db.read() as c:
            rows = c.execute("SELECT ts, data FROM events WHERE namespace = ? AND kind = 'reflect'"
                             " AND ts >= ? ORDER BY ts", (self.ns, ts)).fetchall()
        out: list[tuple[float, list[int], float]] = []
        for t, raw in rows:
            data = json.loads(raw)
            out.append((float(t), [int(i) for i in data.get("ids", [])],
                        float(data.get("reward", 0.0))))
        return out

    # -- co_recall edges ----------------------------------------------------------------

    def co_recall_count(self) -> int:
        """co_recall edges of this namespace."""
        with self.db.read() as c:
            row = c.execute(
                "SELECT count(*) FROM edges WHERE type = 'co_recall' AND src IN "
                "(SELECT id FROM memories WHERE namespace = ?)", (self.ns,)).fetchone()
        return int(row[0])

    def prunable_after(self, factor: float, below: float) -> int:
        """co_recall edges whose weight × ``factor`` would fall under ``below``."""
        with self.db.read() as c:
            row = c.execute(
                "SELECT count(*) FROM edges WHERE type = 'co_recall' AND weight * ? < ? AND src IN"
                " (SELECT id FROM memories WHERE namespace = ?)", (factor, below, self.ns)
            ).fetchone()
        return int(row[0])

    def edge_weights(self, pairs: Iterable[tuple[int, int]]) -> dict[tuple[int, int], float]:
        """Current co_recall weights of directed pairs (absent pairs are left out)."""
        by_src: dict[int, set[int]] = {}
        for a, b in pairs:
            by_src.setdefault(a, set()).add(b)
        out: dict[tuple[int, int], float] = {}
        srcs = list(by_src)
        with self.db.read() as c:
            for lo in range(0, len(srcs), CHUNK):
                chunk = srcs[lo:lo + CHUNK]
                for a, b, w in c.execute(
                    f"SELECT src, dst, weight FROM edges WHERE type = 'co_recall' "
                    f"AND src IN ({_ph(len(chunk))})", chunk).fetchall():
                    if int(b) in by_src[int(a)]:
                        out[(int(a), int(b))] = float(w)
        return out

    def commit_plasticity(
        self, *, decay: float, weights: dict[tuple[int, int], float], prune_below: float,
        prune: bool, consumed_upto: int, drop_before: float, now: float,
    ) -> dict[str, int]:
        """Decay, then write new weights, prune, and clear consumed eligibility — one transaction.

        Args:
            decay: factor applied to every co_recall weight of the namespace first.
            weights: final weights of the touched directed pairs (after decay and update).
            prune_below: weight under which a co_recall edge is deleted.
            prune: whether to prune at all (the guard may forbid it).
            consumed_upto: eligibility rows up to this id have been committed.
            drop_before: committed rows older than this are deleted (younger ones stay as
                partners for the next sleep's cross-recall pairs).
            now: the time.

        Returns:
            Counts: written, pruned, eligibility_cleared, skipped (memory gone).
        """
        with self.db.write() as c:
            if decay < 1.0:
                c.execute("UPDATE edges SET weight = weight * ? WHERE type = 'co_recall' AND src IN"
                          " (SELECT id FROM memories WHERE namespace = ?)", (decay, self.ns))
            live = self.existing_ids(c, [x for pair in weights for x in pair])
            rows = [(a, b, w, now, now) for (a, b), w in weights.items()
                    if a in live and b in live and w >= prune_below]
            c.executemany(
                "INSERT INTO edges(src, dst, type, weight, created_at, updated_at) "
                "VALUES (?, ?, 'co_recall', ?, ?, ?) ON CONFLICT(src, dst, type) DO UPDATE SET "
                "weight = excluded.weight, updated_at = excluded.updated_at", rows)
            gone = [(a, b) for (a, b), w in weights.items()
                    if a in live and b in live and w < prune_below]
            pruned = 0
            if prune:
                pruned = changed(c.executemany(
                    "DELETE FROM edges WHERE src = ? AND dst = ? AND type = 'co_recall'", gone))
                pruned += changed(c.execute(
                    "DELETE FROM edges WHERE type = 'co_recall' AND weight < ? AND src IN "
                    "(SELECT id FROM memories WHERE namespace = ?)", (prune_below, self.ns)))
            cleared = changed(c.execute(
                "DELETE FROM eligibility WHERE namespace = ? AND id <= ? AND ts < ?",
                (self.ns, consumed_upto, drop_before)))
            self.set_state(c, "plasticity.cursor", str(consumed_upto))
            self.set_state(c, "plasticity.decayed_at", repr(now))
        return {"written": len(rows), "pruned": int(pruned), "eligibility_cleared": int(cleared),
                "skipped": len(weights) - len(rows) - len(gone)}
