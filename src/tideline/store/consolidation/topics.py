"""The SQL of the keyword and topic steps: the per-memory keyword cache and the topic
clusters with their members."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tideline.store.consolidation.state import SleepView, changed

__all__ = ["TopicRows"]


class TopicRows(SleepView):
    """Keyword cache and topic clusters of one namespace."""

    # -- keywords cache -----------------------------------------------------------------

    def cached_keywords(self) -> dict[int, tuple[int, str]]:
        """memory id → (version, keywords JSON) of the keyword cache."""
        with self.db.read() as c:
            return {int(i): (int(v), str(k)) for i, v, k in c.execute(
                "SELECT k.memory_id, k.version, k.keywords FROM memory_keywords k "
                "JOIN memories m ON m.id = k.memory_id WHERE m.namespace = ?",
                (self.ns,)).fetchall()}

    def put_keywords(self, rows: Sequence[tuple[int, int, str]]) -> None:
        """Store (memory id, version, keywords JSON) in the cache."""
        for lo in range(0, len(rows), 20_000):
            with self.db.write() as c:
                live = self.existing_ids(c, [r[0] for r in rows[lo:lo + 20_000]])
                c.executemany(
                    "INSERT INTO memory_keywords(memory_id, version, keywords) VALUES (?,?,?) "
                    "ON CONFLICT(memory_id) DO UPDATE SET version = excluded.version, "
                    "keywords = excluded.keywords",
                    [r for r in rows[lo:lo + 20_000] if r[0] in live])

    # -- topic clusters -----------------------------------------------------------------

    def replace_topics(self, clusters: Sequence[dict[str, Any]], now: float) -> int:
        """Replace every topic cluster of the namespace.

        Each cluster: ``scope``, ``label``, ``keywords``, ``df``, ``members`` as
        [(memory id, score)]. Returns membership rows written.
        """
        written = 0
        with self.db.write() as c:
            c.execute("DELETE FROM topic_members WHERE cluster_id IN "
                      "(SELECT id FROM topic_clusters WHERE namespace = ?)", (self.ns,))
            c.execute("DELETE FROM topic_clusters WHERE namespace = ?", (self.ns,))
            live = self.existing_ids(c, [m for cl in clusters for m, _ in cl["members"]])
            rows: list[tuple[int, int, float]] = []
            for cl in clusters:
                members = [(m, s) for m, s in cl["members"] if m in live]
                if not members:
                    continue
                cur = c.execute(
                    "INSERT INTO topic_clusters(namespace, scope, label, keywords, size, df, "
                    "built_at) VALUES (?,?,?,?,?,?,?) RETURNING id",
                    (self.ns, cl["scope"], cl["label"], json.dumps(cl["keywords"],
                                                                   ensure_ascii=False),
                     len(members), cl["df"], now))
                cid = int(cur.fetchone()[0])
                rows.extend((cid, m, s) for m, s in members)
                written += len(members)
            # One batch for every cluster's members (PostgreSQL runs it as a few statements).
            c.executemany("INSERT INTO topic_members(cluster_id, memory_id, score) "
                          "VALUES (?,?,?)", rows)
        return written

    def topic_index(self) -> dict[tuple[str, str], int]:
        """(scope, keyword) → topic cluster id, for every keyword of every cluster."""
        out: dict[tuple[str, str], int] = {}
        with self.db.read() as c:
            for cid, scope, kws in c.execute("SELECT id, scope, keywords FROM topic_clusters "
                                             "WHERE namespace = ?", (self.ns,)):
                for kw in json.loads(kws):
                    out.setdefault((str(scope), str(kw)), int(cid))
        return out

    def add_topic_members(self, rows: Sequence[tuple[int, int, float]]) -> int:
        """Add (cluster id, memory id, score) memberships; drop those of superseded memories."""
        with self.db.write() as c:
            live = self.existing_ids(c, [m for _, m, _ in rows])
            added = changed(c.executemany(
                "INSERT INTO topic_members(cluster_id, memory_id, score) VALUES (?,?,?) "
                "ON CONFLICT (cluster_id, memory_id) DO NOTHING",
                [r for r in rows if r[1] in live]))
            c.execute("DELETE FROM topic_members WHERE memory_id IN (SELECT id FROM memories "
                      "WHERE namespace = ? AND status = 'superseded')", (self.ns,))
            c.execute("UPDATE topic_clusters SET size = (SELECT count(*) FROM topic_members t "
                      "WHERE t.cluster_id = topic_clusters.id) WHERE namespace = ?", (self.ns,))
        return int(added)

    def topics(self, scopes: Sequence[str] | None, limit: int) -> list[dict[str, Any]]:
        """Topic clusters, largest first."""
        sql, args = self._scoped("SELECT id, scope, label, keywords, size, df "
                                 "FROM topic_clusters WHERE namespace = ?", scopes)
        with self.db.read() as c:
            rows = c.execute(sql + " ORDER BY size DESC, id LIMIT ?", (*args, limit)).fetchall()
            out = []
            for i, scope, label, kws, size, df in rows:
                members = [int(r[0]) for r in c.execute(
                    "SELECT memory_id FROM topic_members WHERE cluster_id = ? "
                    "ORDER BY score DESC LIMIT 20", (i,)).fetchall()]
                out.append({"id": int(i), "scope": scope, "label": label,
                            "keywords": json.loads(kws), "size": int(size),
                            "df": round(float(df), 4), "members": members})
        return out
