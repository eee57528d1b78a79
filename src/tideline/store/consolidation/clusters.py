"""The SQL of the soft embedding clusters: the vectors they are built from, the clusters,
their members and adjacency, and attention counted by cluster and day."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from tideline.store.consolidation.state import CHUNK, SleepView, changed
from tideline.store.database import Connection
from tideline.store.sql import placeholders as _ph

__all__ = ["ClusterRows"]

_EMB_MEMBER_UPSERT = (
    "INSERT INTO emb_members(memory_id, rank, cluster_id, similarity) VALUES (?,?,?,?) "
    "ON CONFLICT (memory_id, rank) DO UPDATE SET cluster_id = excluded.cluster_id, "
    "similarity = excluded.similarity")


class ClusterRows(SleepView):
    """Embedding clusters of one namespace and the attention heat over them."""

    # -- embedding clusters -------------------------------------------------------------

    def live_ids_by_scope(self) -> dict[str, list[int]]:
        """Ids of live memories grouped by scope."""
        out: dict[str, list[int]] = {}
        with self.db.read() as c:
            for i, scope in c.execute("SELECT id, scope FROM memories WHERE namespace = ? AND "
                                      "status != 'superseded' ORDER BY id", (self.ns,)):
                out.setdefault(str(scope), []).append(int(i))
        return out

    def vector_blobs(self, scope: str, ids: Sequence[int] | None = None,
                     batch: int = 5_000) -> Iterator[list[tuple[int, bytes]]]:
        """Batches of (memory id, vector bytes) of a scope's memory space."""
        space = self.store.space("m", scope)
        if ids is not None:
            for lo in range(0, len(ids), CHUNK):
                chunk = list(ids[lo:lo + CHUNK])
                with self.db.read() as c:
                    yield [(int(k), bytes(v)) for k, v in c.execute(
                        f"SELECT key, v FROM vectors WHERE space = ? AND key IN "
                        f"({_ph(len(chunk))})", (space, *chunk)).fetchall()]
            return
        last = -1
        while True:
            with self.db.read() as c:
                rows = c.execute("SELECT key, v FROM vectors WHERE space = ? AND key > ? "
                                 "ORDER BY key LIMIT ?", (space, last, batch)).fetchall()
            if not rows:
                return
            last = int(rows[-1][0])
            yield [(int(k), bytes(v)) for k, v in rows]

    def turn_vector_blobs(self, scope: str, ids: Sequence[int]) -> list[tuple[int, bytes]]:
        """(turn id, vector bytes) of the given turns of a scope."""
        space = self.store.space("t", scope)
        out: list[tuple[int, bytes]] = []
        with self.db.read() as c:
            for lo in range(0, len(ids), CHUNK):
                chunk = list(ids[lo:lo + CHUNK])
                out.extend((int(k), bytes(v)) for k, v in c.execute(
                    f"SELECT key, v FROM vectors WHERE space = ? AND key IN "
                    f"({_ph(len(chunk))})", (space, *chunk)).fetchall())
        return out

    def emb_clusters(self, scopes: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Embedding clusters (without centroids): id, scope, label, keywords, size, built_at."""
        sql, args = self._scoped("SELECT id, scope, label, keywords, size, built_at "
                                 "FROM emb_clusters WHERE namespace = ?", scopes)
        with self.db.read() as c:
            rows = c.execute(sql + " ORDER BY scope, id", args).fetchall()
        return [{"id": int(i), "scope": s, "label": lb, "keywords": json.loads(k),
                 "size": int(n), "built_at": float(b)} for i, s, lb, k, n, b in rows]

    def centroids(self, scopes: Sequence[str] | None) -> list[tuple[int, str, bytes]]:
        """(cluster id, scope, centroid bytes) of the given scopes (None: all)."""
        sql, args = self._scoped(
            "SELECT id, scope, centroid FROM emb_clusters WHERE namespace = ?", scopes)
        with self.db.read() as c:
            return [(int(i), str(s), bytes(b)) for i, s, b in c.execute(
                sql + " ORDER BY id", args).fetchall()]

    def members_missing(self, scope: str) -> list[int]:
        """Live memories of a scope with no cluster membership yet."""
        with self.db.read() as c:
            return [int(r[0]) for r in c.execute(
                "SELECT m.id FROM memories m WHERE m.namespace = ? AND m.scope = ? AND "
                "m.status != 'superseded' AND NOT EXISTS (SELECT 1 FROM emb_members e "
                "WHERE e.memory_id = m.id) ORDER BY m.id", (self.ns, scope)).fetchall()]

    def replace_emb_clusters(
        self, scope: str, clusters: Sequence[dict[str, Any]],
        members: Sequence[tuple[int, int, int, float]], adjacency: Sequence[tuple[int, int, int]],
        now: float,
    ) -> dict[int, int]:
        """Replace the clusters of one scope.

        Args:
            scope: the scope.
            clusters: dicts with ``key`` (index in this build), ``reuse`` (an old id to keep,
                or None), ``label``, ``keywords``, ``size``, ``centroid`` (bytes).
            members: (memory id, rank, cluster key, similarity).
            adjacency: (cluster key a, cluster key b, shared) with a < b.
            now: build time.

        Returns:
            cluster key → id.
        """
        with self.db.write() as c:
            old = {int(r[0]) for r in c.execute(
                "SELECT id FROM emb_clusters WHERE namespace = ? AND scope = ?",
                (self.ns, scope)).fetchall()}
            if old:
                ph = _ph(len(old))
                c.execute(f"DELETE FROM emb_adjacency WHERE a IN ({ph})", list(old))
                c.execute(f"DELETE FROM emb_members WHERE cluster_id IN ({ph})", list(old))
            keep = {int(cl["reuse"]) for cl in clusters if cl.get("reuse") in old}
            gone = sorted(old - keep)
            for lo in range(0, len(gone), CHUNK):
                chunk = gone[lo:lo + CHUNK]
                c.execute(f"DELETE FROM emb_clusters WHERE id IN ({_ph(len(chunk))})",
                          chunk)
            ids: dict[int, int] = {}
            for cl in clusters:
                values = (cl["label"], json.dumps(cl["keywords"], ensure_ascii=False),
                          int(cl["size"]), cl["centroid"], now)
                if cl.get("reuse") in keep:
                    c.execute("UPDATE emb_clusters SET label = ?, keywords = ?, size = ?, "
                              "centroid = ?, built_at = ? WHERE id = ?", (*values, cl["reuse"]))
                    ids[int(cl["key"])] = int(cl["reuse"])
                else:
                    cur = c.execute(
                        "INSERT INTO emb_clusters(namespace, scope, label, keywords, size, "
                        "centroid, built_at) VALUES (?,?,?,?,?,?,?) RETURNING id",
                        (self.ns, scope, *values))
                    ids[int(cl["key"])] = int(cur.fetchone()[0])
            live = self.existing_ids(c, [m for m, _, _, _ in members])
            c.executemany(_EMB_MEMBER_UPSERT,
                          [(m, r, ids[k], s) for m, r, k, s in members if m in live])
            rows = []
            for a, b, n in adjacency:
                rows.append((ids[a], ids[b], n))
                rows.append((ids[b], ids[a], n))
            c.executemany("INSERT INTO emb_adjacency(a, b, shared) VALUES (?,?,?)", rows)
            self.set_state(c, "clusters.version", repr(now))
        return ids

    def add_emb_members(self, members: Sequence[tuple[int, int, int, float]],
                        adjacency: Sequence[tuple[int, int, int]], now: float) -> int:
        """Add memberships (memory id, rank, cluster id, similarity) and adjacency increments."""
        with self.db.write() as c:
            live = self.existing_ids(c, [m for m, _, _, _ in members])
            rows = [(m, r, k, s) for m, r, k, s in members if m in live]
            c.executemany(_EMB_MEMBER_UPSERT, rows)
            c.executemany("UPDATE emb_clusters SET size = size + 1 WHERE id = ?",
                          [(k,) for _, r, k, _ in rows if r == 0])
            inc = []
            for a, b, n in adjacency:
                inc.extend([(a, b, n), (b, a, n)])
            c.executemany("INSERT INTO emb_adjacency(a, b, shared) VALUES (?,?,?) "
                          "ON CONFLICT(a, b) DO UPDATE SET "
                          "shared = emb_adjacency.shared + excluded.shared", inc)
            self.set_state(c, "clusters.version", repr(now))
        return len(rows)

    def adjacent(self, cluster_ids: Sequence[int], per: int) -> list[int]:
        """Up to ``per`` most adjacent clusters of each given cluster (not themselves)."""
        if not cluster_ids or per <= 0:
            return []
        ids = list(dict.fromkeys(int(c) for c in cluster_ids))[:CHUNK]
        by: dict[int, list[int]] = {}
        with self.db.read() as c:  # one statement (a round trip on a server), not one per id
            for a, b in c.execute(
                    "SELECT a, b FROM (SELECT a, b, row_number() OVER (PARTITION BY a "
                    "ORDER BY shared DESC, b) AS r FROM emb_adjacency WHERE a IN "
                    f"({_ph(len(ids))})) AS ranked WHERE r <= ? ORDER BY a, r",
                    (*ids, per)).fetchall():
                by.setdefault(int(a), []).append(int(b))
        out = [b for cid in cluster_ids for b in by.get(int(cid), [])]
        return [x for x in dict.fromkeys(out) if x not in set(cluster_ids)]

    def cluster_members(self, cluster_ids: Sequence[int], limit: int) -> list[int]:
        """Memories whose nearest cluster is one of ``cluster_ids``, most typical first."""
        if not cluster_ids:
            return []
        with self.db.read() as c:
            return [int(r[0]) for r in c.execute(
                f"SELECT memory_id FROM emb_members WHERE cluster_id IN "
                f"({_ph(len(cluster_ids))}) AND rank = 0 ORDER BY similarity DESC LIMIT ?",
                (*cluster_ids, limit)).fetchall()]

    def members_of_each(self, cluster_ids: Sequence[int], limit: int) -> list[int]:
        """Up to ``limit`` members of each cluster as :meth:`cluster_members` gives them
        for that cluster alone, cluster after cluster, in one statement."""
        ids = list(dict.fromkeys(int(c) for c in cluster_ids))[:CHUNK]
        if not ids or limit <= 0:
            return []
        by: dict[int, list[int]] = {}
        with self.db.read() as c:
            for cid, mid in c.execute(
                    "SELECT cluster_id, memory_id FROM (SELECT cluster_id, memory_id, "
                    "row_number() OVER (PARTITION BY cluster_id ORDER BY similarity DESC, "
                    "memory_id) AS r FROM emb_members WHERE rank = 0 AND cluster_id IN "
                    f"({_ph(len(ids))})) AS ranked WHERE r <= ? ORDER BY cluster_id, r",
                    (*ids, limit)).fetchall():
                by.setdefault(int(cid), []).append(int(mid))
        return [m for cid in cluster_ids for m in by.get(int(cid), [])]

    def adjacency_rows(self, cluster_ids: Sequence[int]) -> list[tuple[int, int, int]]:
        """(a, b, shared) with a < b among the given clusters."""
        if not cluster_ids:
            return []
        ids = list(cluster_ids)
        out: list[tuple[int, int, int]] = []
        with self.db.read() as c:
            for lo in range(0, len(ids), CHUNK):
                chunk = ids[lo:lo + CHUNK]
                out.extend((int(a), int(b), int(n)) for a, b, n in c.execute(
                    f"SELECT a, b, shared FROM emb_adjacency WHERE a IN ({_ph(len(chunk))}) "
                    f"AND a < b", chunk).fetchall())
        return out

    def primary_clusters(self, c: Connection, ids: Sequence[int]) -> dict[int, int]:
        """memory id → nearest cluster id (inside the caller's transaction)."""
        if not ids:
            return {}
        return {int(m): int(k) for m, k in c.execute(
            f"SELECT memory_id, cluster_id FROM emb_members WHERE rank = 0 AND memory_id IN "
            f"({_ph(len(ids))})", list(ids)).fetchall()}

    # -- attention ----------------------------------------------------------------------

    def fill_attention_clusters(self) -> int:
        """Give attention rows logged before clustering their memory's nearest cluster."""
        with self.db.write() as c:
            return changed(c.execute(
                "UPDATE attention_log SET cluster = (SELECT e.cluster_id FROM emb_members e "
                "WHERE e.memory_id = attention_log.memory_id AND e.rank = 0) "
                "WHERE namespace = ? AND cluster IS NULL AND EXISTS (SELECT 1 FROM emb_members e "
                "WHERE e.memory_id = attention_log.memory_id AND e.rank = 0)", (self.ns,)))

    def attention_by_cluster_day(
        self, since: float, scopes: Sequence[str] | None,
    ) -> list[tuple[int | None, int, int, float, float]]:
        """(cluster, day index from ``since``, hits, mean similarity, last hit) of the window.

        A hit counts for its memory's current nearest cluster, falling back to the one
        logged at recall time (the memory may since have been forgotten).
        """
        sql = ("SELECT coalesce(e.cluster_id, a.cluster) AS cl, "
               f"{self.db.dialect.whole('(a.ts - ?) / 86400')} AS day, count(*), "
               "avg(a.similarity), "
               "max(a.ts) FROM attention_log a LEFT JOIN emb_members e "
               "ON e.memory_id = a.memory_id AND e.rank = 0 ")
        args: list[Any] = [since]
        if scopes is not None:
            sql += (f"LEFT JOIN memories m ON m.id = a.memory_id WHERE a.namespace = ? "
                    f"AND a.ts >= ? AND (m.scope IS NULL OR m.scope IN ({_ph(len(scopes))})) ")
            args.extend([self.ns, since, *scopes])
        else:
            sql += "WHERE a.namespace = ? AND a.ts >= ? "
            args.extend([self.ns, since])
        with self.db.read() as c:
            rows = c.execute(sql + "GROUP BY cl, day", args).fetchall()
        return [(None if cl is None else int(cl), int(d), int(n), float(s or 0.0), float(t))
                for cl, d, n, s, t in rows]
