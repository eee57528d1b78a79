"""SQL of sleep: its state and lock, the gate, and the reads and writes of every step.

Only the store package talks to SQLite; the steps in :mod:`tideline.sleep` plan
in Python and hand their changes to the methods here, which apply them in short
``BEGIN IMMEDIATE`` transactions. Updates of memories re-check each row's
``version`` (a row changed meanwhile by a write, reflect or revise is left
alone and counted as a conflict), and nothing here ever deletes a memory.

This module imports nothing heavy at load time: :func:`peek_gate` is what the
``tideline sleep`` command calls before it decides whether to open the store
at all, and that check must stay far below the cost of loading numpy.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tideline.secrets import redact_json, redact_secrets
from tideline.store.base import Connection
from tideline.store.events import append_event, change_marker
from tideline.store.rows import MEMORY_COLUMNS, TURN_COLUMNS, memory_from_row, turn_from_row
from tideline.store.view import NamespaceView
from tideline.store.view import placeholders as _ph

if TYPE_CHECKING:
    from tideline.models import MemoryRecord

__all__ = ["ConsolidationStore", "GateView", "LockHolder"]

_CHUNK = 900

_EMB_MEMBER_UPSERT = (
    "INSERT INTO emb_members(memory_id, rank, cluster_id, similarity) VALUES (?,?,?,?) "
    "ON CONFLICT (memory_id, rank) DO UPDATE SET cluster_id = excluded.cluster_id, "
    "similarity = excluded.similarity")


def _changed(cur: Any) -> int:
    """Rows a statement changed (``executemany``: summed over its parameter sets)."""
    return max(int(cur.rowcount), 0)


@dataclass(frozen=True)
class GateView:
    """What the gate sees: the store's marker now and the one stored by the last sleep."""

    marker: str
    stored: str | None
    last_sleep: float | None

    def unchanged(self, refresh_after_s: float, now: float) -> bool:
        """True when nothing changed since the last sleep and it is recent enough."""
        return (self.stored is not None and self.stored == self.marker
                and self.last_sleep is not None and now - self.last_sleep < refresh_after_s)


@dataclass(frozen=True)
class LockHolder:
    """Who holds the sleep lock."""

    holder: str
    pid: int
    host: str
    expires: float

    def abandoned(self, now: float) -> bool:
        """True when the lease ran out or the holder's process is gone (same host)."""
        if now > self.expires:
            return True
        if self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


class ConsolidationStore(NamespaceView):
    """The sleep-side SQL of one namespace.

    Args:
        store: the opened SQLite store.
    """

    # -- state, gate, lock ----------------------------------------------------------------

    def get_state(self, key: str) -> str | None:
        """One value of this namespace's sleep state."""
        with self.db.read() as c:
            row = c.execute("SELECT value FROM sleep_state WHERE namespace = ? AND key = ?",
                            (self.ns, key)).fetchone()
        return None if row is None else str(row[0])

    def get_json(self, key: str, default: Any = None) -> Any:
        """A JSON value of the sleep state (``default`` when absent)."""
        raw = self.get_state(key)
        return default if raw is None else json.loads(raw)

    def set_state(self, c: Connection, key: str, value: Any) -> None:
        """Set a sleep-state value inside the caller's transaction (JSON unless a str)."""
        text = redact_secrets(value)[0] if isinstance(value, str) else redact_json(value)
        c.execute(
            "INSERT INTO sleep_state(namespace, key, value, updated_at) VALUES (?,?,?,?) "
            "ON CONFLICT(namespace, key) DO UPDATE SET value = excluded.value, "
            "updated_at = excluded.updated_at", (self.ns, key, text, time.time()))

    def put_state(self, key: str, value: Any) -> None:
        """Set a sleep-state value in its own transaction."""
        with self.db.write() as c:
            self.set_state(c, key, value)

    def gate(self) -> GateView:
        """The gate's view through the open connection."""
        with self.db.read() as c:
            marker = change_marker(c)
            rows = dict(c.execute(
                "SELECT key, value FROM sleep_state WHERE namespace = ? AND key IN "
                "('marker', 'last_sleep')", (self.ns,)).fetchall())
        last = rows.get("last_sleep")
        return GateView(marker=marker, stored=rows.get("marker"),
                        last_sleep=float(last) if last is not None else None)

    def mark_slept(self, now: float) -> str:
        """Store the current marker and time as the last sleep's; returns the marker."""
        with self.db.write() as c:
            marker = change_marker(c)
            self.set_state(c, "marker", marker)
            self.set_state(c, "last_sleep", repr(now))
        return marker

    def try_lock(self, holder: str, lease_s: float, now: float) -> LockHolder | None:
        """Take the sleep lock unless someone alive holds it.

        On PostgreSQL the lock is an advisory lock across every host (it dies with its
        holder's connection); the row then only says who holds it.

        Returns:
            None when taken (or already ours), else the current holder.
        """
        advisory = self.store.acquire_sleep_lock(holder)
        if advisory is False:
            with self.db.read() as c:
                row = c.execute("SELECT value FROM sleep_state WHERE namespace = ? "
                                "AND key = 'lock'", (self.ns,)).fetchone()
            return LockHolder(**json.loads(row[0])) if row is not None else LockHolder(
                holder="?", pid=0, host="?", expires=now + lease_s)
        with self.db.write() as c:
            row = c.execute("SELECT value FROM sleep_state WHERE namespace = ? AND key = 'lock'",
                            (self.ns,)).fetchone()
            if row is not None and advisory is None:  # no backend lock: the lease decides
                cur = LockHolder(**json.loads(row[0]))
                if cur.holder != holder and not cur.abandoned(now):
                    return cur
            mine = {"holder": holder, "pid": os.getpid(), "host": socket.gethostname(),
                    "expires": now + lease_s}
            self.set_state(c, "lock", mine)
        return None

    def renew_lock(self, holder: str, lease_s: float) -> None:
        """Extend our lease (between steps)."""
        with self.db.write() as c:
            row = c.execute("SELECT value FROM sleep_state WHERE namespace = ? AND key = 'lock'",
                            (self.ns,)).fetchone()
            if row is None:
                return
            cur = json.loads(row[0])
            if cur.get("holder") == holder:
                cur["expires"] = time.time() + lease_s
                self.set_state(c, "lock", cur)

    def release_lock(self, holder: str) -> None:
        """Drop the lock if we hold it."""
        try:
            with self.db.write() as c:
                row = c.execute("SELECT value FROM sleep_state WHERE namespace = ? "
                                "AND key = 'lock'", (self.ns,)).fetchone()
                if row is not None and json.loads(row[0]).get("holder") == holder:
                    c.execute("DELETE FROM sleep_state WHERE namespace = ? AND key = 'lock'",
                              (self.ns,))
        finally:
            self.store.release_sleep_lock(holder)

    # -- memories: reads ------------------------------------------------------------------

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

    def entity_rows(self) -> list[tuple[int, str, str]]:
        """(id, entities_role, related_entities) of live rows that name anyone."""
        with self.db.read() as c:
            rows = c.execute(
                "SELECT id, entities_role, related_entities FROM memories WHERE namespace = ? "
                "AND status != 'superseded' AND (entities_role != '' OR related_entities != '[]')"
                " ORDER BY id", (self.ns,)).fetchall()
        return [(int(a), str(b), str(c_)) for a, b, c_ in rows]

    def memories(self, ids: Iterable[int]) -> dict[int, MemoryRecord]:
        """Full records by id (looked up by primary key)."""
        wanted = list(dict.fromkeys(int(i) for i in ids))
        out: dict[int, MemoryRecord] = {}
        with self.db.read() as c:
            for lo in range(0, len(wanted), _CHUNK):
                chunk = wanted[lo:lo + _CHUNK]
                # "namespace || ''": without statistics SQLite would walk a namespace
                # index (every row of the namespace) instead of the primary key; an
                # expression keeps it on the key (unary "+" does too, but only on SQLite).
                for row in c.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN "
                    f"({_ph(len(chunk))}) AND namespace || '' = ?", (*chunk, self.ns)).fetchall():
                    rec = memory_from_row(row)
                    out[rec.id] = rec
        return out

    def existing_ids(self, c: Connection, ids: Iterable[int]) -> set[int]:
        """Which of ``ids`` are still memories of this namespace (inside ``c``)."""
        wanted = list(dict.fromkeys(int(i) for i in ids))
        out: set[int] = set()
        if len(wanted) > 4 * _CHUNK:  # one scan beats hundreds of IN (...) lookups
            every = {int(r[0]) for r in c.execute(
                "SELECT id FROM memories WHERE namespace = ?", (self.ns,)).fetchall()}
            return every.intersection(wanted)
        for lo in range(0, len(wanted), _CHUNK):
            chunk = wanted[lo:lo + _CHUNK]
            out.update(int(r[0]) for r in c.execute(
                f"SELECT id FROM memories WHERE id IN ({_ph(len(chunk))}) AND namespace || '' = ?",
                (*chunk, self.ns)).fetchall())
        return out

    # -- memories: version-checked updates ------------------------------------------------

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
            return _changed(cur)

    def set_weights(self, rows: Sequence[tuple[int, int, int, float]], now: float) -> int:
        """Apply (id, version, recurrence, weight); returns rows updated."""
        updated = 0
        for lo in range(0, len(rows), 20_000):
            with self.db.write() as c:
                updated += _changed(c.executemany(
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
            return _changed(cur)

    # -- recall traces --------------------------------------------------------------------

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

    # -- co_recall edges ------------------------------------------------------------------

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
            for lo in range(0, len(srcs), _CHUNK):
                chunk = srcs[lo:lo + _CHUNK]
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
                pruned = _changed(c.executemany(
                    "DELETE FROM edges WHERE src = ? AND dst = ? AND type = 'co_recall'", gone))
                pruned += _changed(c.execute(
                    "DELETE FROM edges WHERE type = 'co_recall' AND weight < ? AND src IN "
                    "(SELECT id FROM memories WHERE namespace = ?)", (prune_below, self.ns)))
            cleared = _changed(c.execute(
                "DELETE FROM eligibility WHERE namespace = ? AND id <= ? AND ts < ?",
                (self.ns, consumed_upto, drop_before)))
            self.set_state(c, "plasticity.cursor", str(consumed_upto))
            self.set_state(c, "plasticity.decayed_at", repr(now))
        return {"written": len(rows), "pruned": int(pruned), "eligibility_cleared": int(cleared),
                "skipped": len(weights) - len(rows) - len(gone)}

    # -- keywords cache -------------------------------------------------------------------

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

    # -- topic clusters -------------------------------------------------------------------

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
                c.executemany("INSERT INTO topic_members(cluster_id, memory_id, score) "
                              "VALUES (?,?,?)", [(cid, m, s) for m, s in members])
                written += len(members)
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
            added = _changed(c.executemany(
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
        sql = "SELECT id, scope, label, keywords, size, df FROM topic_clusters WHERE namespace = ?"
        args: list[Any] = [self.ns]
        if scopes is not None:
            sql += f" AND scope IN ({_ph(len(scopes))})"
            args.extend(scopes)
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

    # -- embedding clusters ---------------------------------------------------------------

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
            for lo in range(0, len(ids), _CHUNK):
                chunk = list(ids[lo:lo + _CHUNK])
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
            for lo in range(0, len(ids), _CHUNK):
                chunk = list(ids[lo:lo + _CHUNK])
                out.extend((int(k), bytes(v)) for k, v in c.execute(
                    f"SELECT key, v FROM vectors WHERE space = ? AND key IN "
                    f"({_ph(len(chunk))})", (space, *chunk)).fetchall())
        return out

    def emb_clusters(self, scopes: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Embedding clusters (without centroids): id, scope, label, keywords, size, built_at."""
        sql = ("SELECT id, scope, label, keywords, size, built_at FROM emb_clusters "
               "WHERE namespace = ?")
        args: list[Any] = [self.ns]
        if scopes is not None:
            sql += f" AND scope IN ({_ph(len(scopes))})"
            args.extend(scopes)
        with self.db.read() as c:
            rows = c.execute(sql + " ORDER BY scope, id", args).fetchall()
        return [{"id": int(i), "scope": s, "label": lb, "keywords": json.loads(k),
                 "size": int(n), "built_at": float(b)} for i, s, lb, k, n, b in rows]

    def centroids(self, scopes: Sequence[str] | None) -> list[tuple[int, str, bytes]]:
        """(cluster id, scope, centroid bytes) of the given scopes (None: all)."""
        sql = "SELECT id, scope, centroid FROM emb_clusters WHERE namespace = ?"
        args: list[Any] = [self.ns]
        if scopes is not None:
            sql += f" AND scope IN ({_ph(len(scopes))})"
            args.extend(scopes)
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
            for lo in range(0, len(gone), _CHUNK):
                chunk = gone[lo:lo + _CHUNK]
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
        ids = list(dict.fromkeys(int(c) for c in cluster_ids))[:_CHUNK]
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
        ids = list(dict.fromkeys(int(c) for c in cluster_ids))[:_CHUNK]
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
            for lo in range(0, len(ids), _CHUNK):
                chunk = ids[lo:lo + _CHUNK]
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

    # -- attention ------------------------------------------------------------------------

    def fill_attention_clusters(self) -> int:
        """Give attention rows logged before clustering their memory's nearest cluster."""
        with self.db.write() as c:
            return _changed(c.execute(
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

    # -- entity graph ---------------------------------------------------------------------

    def replace_entity_graph(self, nodes: Sequence[dict[str, Any]],
                             edges: Sequence[dict[str, Any]], now: float) -> None:
        """Replace the namespace's entity graph."""
        with self.db.write() as c:
            c.execute("DELETE FROM entity_nodes WHERE namespace = ?", (self.ns,))
            c.execute("DELETE FROM entity_edges WHERE namespace = ?", (self.ns,))
            c.executemany(
                "INSERT INTO entity_nodes(namespace, entity, mentions, roles, memories, "
                "updated_at) VALUES (?,?,?,?,?,?)",
                [(self.ns, n["entity"], n["mentions"], json.dumps(n["roles"], ensure_ascii=False),
                  json.dumps(n["memories"]), now) for n in nodes])
            c.executemany(
                "INSERT INTO entity_edges(namespace, a, b, count, role_pairs, updated_at) "
                "VALUES (?,?,?,?,?,?)",
                [(self.ns, e["a"], e["b"], e["count"],
                  json.dumps(e["role_pairs"], ensure_ascii=False), now) for e in edges])

    def entity_graph(self, limit: int) -> dict[str, list[dict[str, Any]]]:
        """The entity graph: nodes by mentions, edges by count."""
        with self.db.read() as c:
            nodes = [{"entity": e, "mentions": int(n), "roles": json.loads(r),
                      "memories": json.loads(m)} for e, n, r, m in c.execute(
                "SELECT entity, mentions, roles, memories FROM entity_nodes WHERE namespace = ? "
                "ORDER BY mentions DESC, entity LIMIT ?", (self.ns, limit)).fetchall()]
            edges = [{"a": a, "b": b, "count": int(n), "role_pairs": json.loads(p)}
                     for a, b, n, p in c.execute(
                "SELECT a, b, count, role_pairs FROM entity_edges WHERE namespace = ? "
                "ORDER BY count DESC, a, b LIMIT ?", (self.ns, limit)).fetchall()]
        return {"nodes": nodes, "edges": edges}

    # -- raw turns: scan and backfill -----------------------------------------------------

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

    # -- retention snapshots --------------------------------------------------------------

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

    # -- journal --------------------------------------------------------------------------

    def log(self, kind: str, data: dict[str, Any], now: float) -> int:
        """Append one event; returns its id."""
        with self.db.write() as c:
            return append_event(c, self.ns, kind, data, now=now)

    def record_recall(
        self, data: dict[str, Any], hits: Sequence[tuple[int, float, float]], tier: str,
        now: float,
    ) -> int:
        """Journal one recall in one short transaction: its ``recall`` event, and for each
        hit (memory id, similarity, score; best first) an ``attention_log`` row (with the
        memory's home cluster) and an ``eligibility`` row (for co-recall edges).

        Its commit does not wait for the log to reach the disk (what SQLite's
        ``synchronous = NORMAL`` does for every commit): a crash of the machine, or of
        the PostgreSQL server, may lose the journal of the last fraction of a second of
        recalls; nothing else, and nothing is left half-written.

        Returns:
            The recall event's id.
        """
        with self.db.write() as c:
            if self.db.dialect.relaxed_commit:
                c.execute(self.db.dialect.relaxed_commit)
            recall_id = append_event(c, self.ns, "recall", data, now=now)
            home = self.primary_clusters(c, [mid for mid, _, _ in hits])
            c.executemany(
                "INSERT INTO attention_log(namespace, memory_id, cluster, similarity, tier, ts) "
                "VALUES (?,?,?,?,?,?)",
                [(self.ns, mid, home.get(mid), sim, tier, now) for mid, sim, _ in hits])
            c.executemany(
                "INSERT INTO eligibility(namespace, recall_id, memory_id, rank, score, ts) "
                "VALUES (?,?,?,?,?,?)",
                [(self.ns, recall_id, mid, rank, score, now)
                 for rank, (mid, _, score) in enumerate(hits)])
        return recall_id
