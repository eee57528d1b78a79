"""SQL for agent integration: the injection tiers, hooks and importers.

Everything here is plain ``sqlite3`` over :class:`~tideline.store.sqlite.connection.Database`,
with no numpy and no embedder, so a hook (``session-start``, a ``stop`` with nothing
new) can read what it needs in a few milliseconds without loading the model. The
facade (:class:`tideline.Memory`) uses the same reader over its own connection.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tideline.errors import NotFound, StoreCorrupt
from tideline.secrets import redact_json
from tideline.store.sqlite.connection import Database
from tideline.store.sqlite.errors import from_sqlite
from tideline.store.view import placeholders as _ph
from tideline.times import clamped_time, stored_time

__all__ = ["AgentReader", "read_hermes_sessions"]

_MEMORY_COLS = ("id, scope, kind, gesture, context, cognition_direction, tags, weight, status, "
                "event_time, recorded_at, source_links")
_TURN_COLS = ("id, session, turn_index, speaker, role, text, ts, source, message_id, scope, "
              "recorded_at")
# Journal kinds that never count as "something changed" for the sleep gate.
_QUIET_KINDS = ("hook", "hook_error", "inject", "sleep", "sleep_skipped", "sleep_gate")


def _memory(row: Sequence[Any]) -> dict[str, Any]:
    gesture, context, direction = row[3], row[4], row[5]
    text = "\n".join([gesture] + ([f"Context: {context}"] if context else [])
                     + ([f"Direction: {direction}"] if direction else []))
    return {"id": row[0], "scope": row[1], "kind": row[2], "gesture": gesture, "text": text,
            "tags": json.loads(row[6] or "[]"), "weight": float(row[7]), "status": row[8],
            "event_time": stored_time(row[9]), "recorded_at": clamped_time(row[10]),
            "source_links": json.loads(row[11] or "[]")}


def _turn(row: Sequence[Any]) -> dict[str, Any]:
    return {"id": row[0], "session": row[1], "turn_index": row[2], "speaker": row[3],
            "role": row[4], "text": row[5], "timestamp": stored_time(row[6]), "source": row[7],
            "message_id": row[8], "scope": row[9], "recorded_at": clamped_time(row[10])}


class AgentReader:
    """Reads (and a few small writes) for injection, hooks and importers in one namespace.

    Args:
        db: an open database.
        namespace: the namespace to read.
    """

    def __init__(self, db: Database, namespace: str) -> None:
        self.db = db
        self.ns = namespace

    @classmethod
    def open(cls, home: Path, namespace: str) -> AgentReader:
        """Open the store directory without the embedder (creates/migrates it if needed).

        Raises:
            StoreCorrupt: the file is not a Tideline database.
            SchemaTooNew: written by a newer Tideline.
        """
        return cls(Database(home), namespace)

    def close(self) -> None:
        """Close the connection (only when this reader opened it)."""
        self.db.close()

    # -- snapshot (T0) --------------------------------------------------------------------

    def snapshot(self, scopes: Sequence[str]) -> dict[str, Any]:
        """Counts for the identity anchor: memories (all / in scope), turns, last session."""
        ns = self.ns
        with self.db.read() as c:
            total = c.execute("SELECT count(*) FROM memories WHERE namespace = ?",
                              (ns,)).fetchone()[0]
            in_scope = c.execute(
                f"SELECT count(*) FROM memories WHERE namespace = ? AND scope IN ({_ph(len(scopes))}) "  # noqa: S608,E501
                "AND status NOT IN ('superseded')", (ns, *scopes)).fetchone()[0]
            by_status = dict(c.execute(
                f"SELECT status, count(*) FROM memories WHERE namespace = ? AND scope IN ({_ph(len(scopes))}) "  # noqa: S608,E501
                "GROUP BY status", (ns, *scopes)).fetchall())
            turns, sessions = c.execute(
                "SELECT count(*), count(DISTINCT session) FROM turns WHERE namespace = ?",
                (ns,)).fetchone()
            last = c.execute(
                f"SELECT session, max(coalesce(ts, recorded_at)) FROM turns WHERE namespace = ? "  # noqa: S608
                f"AND scope IN ({_ph(len(scopes))})", (ns, *scopes)).fetchone()
            last_memory = c.execute(
                "SELECT max(recorded_at) FROM memories WHERE namespace = ?", (ns,)).fetchone()[0]
        return {"memories": int(total), "memories_in_scope": int(in_scope),
                "by_status": {str(k): int(v) for k, v in by_status.items()},
                "turns": int(turns), "sessions": int(sessions),
                "last_session": last[0] if last and last[1] is not None else None,
                "last_session_time": last[1] if last else None,
                "last_memory_time": last_memory}

    def self_concept(self) -> list[dict[str, Any]]:
        """Self-concept facets (fact, terrain, reflection)."""
        with self.db.read() as c:
            rows = c.execute("SELECT facet, content, version, updated_at FROM self_concept "
                             "WHERE namespace = ? ORDER BY facet", (self.ns,)).fetchall()
        return [{"facet": f, "content": t, "version": v, "updated_at": u} for f, t, v, u in rows]

    def profiles(self, limit: int) -> list[dict[str, Any]]:
        """Profile facets, most recently updated first."""
        with self.db.read() as c:
            rows = c.execute("SELECT entity, facet, content, version, updated_at FROM profiles "
                             "WHERE namespace = ? ORDER BY updated_at DESC LIMIT ?",
                             (self.ns, limit)).fetchall()
        return [{"entity": e, "facet": f, "content": t, "version": v, "updated_at": u}
                for e, f, t, v, u in rows]

    # -- T2: the high-weight pool ---------------------------------------------------------

    def high_weight(self, scopes: Sequence[str], min_weight: float,
                    top: int) -> list[dict[str, Any]]:
        """Memories above ``min_weight`` in ``scopes``, neither dormant nor superseded."""
        with self.db.read() as c:
            rows = c.execute(
                f"SELECT {_MEMORY_COLS} FROM memories WHERE namespace = ? "  # noqa: S608
                f"AND scope IN ({_ph(len(scopes))}) AND status NOT IN ('dormant', 'superseded') "
                "AND weight > ? ORDER BY weight DESC, coalesce(event_time, recorded_at) DESC "
                "LIMIT ?", (self.ns, *scopes, min_weight, top)).fetchall()
        return [_memory(r) for r in rows]

    # -- T2b: the context bridge ----------------------------------------------------------

    def bridge_session(self, scopes: Sequence[str], window_s: float,
                       exclude: str | None = None) -> dict[str, Any] | None:
        """Pick ONE session of the most recent day of raw texture.

        The session whose linked memory (through ``source_links``) has the highest
        weight wins; without any linked memory, the most recent session.

        Returns:
            ``{"session", "reason", "memory_id", "weight", "last_time"}`` or None.
        """
        ns = self.ns
        excl = exclude or ""
        with self.db.read() as c:
            newest = c.execute(
                f"SELECT max(coalesce(ts, recorded_at)) FROM turns WHERE namespace = ? "  # noqa: S608
                f"AND scope IN ({_ph(len(scopes))}) AND session != ?",
                (ns, *scopes, excl)).fetchone()[0]
            if newest is None:
                return None
            start = clamped_time(newest) - window_s
            sessions = c.execute(
                f"SELECT session, max(coalesce(ts, recorded_at)) AS last FROM turns "  # noqa: S608
                f"WHERE namespace = ? AND scope IN ({_ph(len(scopes))}) AND session != ? "
                "AND coalesce(ts, recorded_at) >= ? GROUP BY session ORDER BY last DESC LIMIT 200",
                (ns, *scopes, excl, start)).fetchall()
            if not sessions:
                return None
            names = [s for s, _ in sessions]
            # A memory linked to a turn of the window was recorded after that turn, so only
            # memories recorded since the window opened are read (indexed; no full scan).
            best = c.execute(
                f"SELECT t.session, m.id, m.weight FROM memories m, json_each(m.source_links) j "  # noqa: S608
                f"JOIN turns t ON t.id = j.value WHERE m.namespace = ? AND m.recorded_at >= ? "
                f"AND m.scope IN ({_ph(len(scopes))}) AND m.status != 'superseded' "
                f"AND m.source_links != '[]' AND t.session IN ({_ph(len(names))}) "
                "ORDER BY m.weight DESC, m.id DESC LIMIT 1",
                (ns, start, *scopes, *names)).fetchone()
        last_of = dict(sessions)
        if best is not None:
            return {"session": best[0], "reason": "highest_weight_memory", "memory_id": best[1],
                    "weight": float(best[2]), "last_time": last_of.get(best[0])}
        return {"session": sessions[0][0], "reason": "most_recent", "memory_id": None,
                "weight": None, "last_time": sessions[0][1]}

    def session_tail(self, session: str, limit: int,
                     scopes: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The last ``limit`` turns of a session in ``scopes`` (None: any), in order.

        A session name is no key across projects (the MCP server's default session is
        ``mcp`` everywhere), so readers on behalf of a project pass its scopes.
        """
        sql = f"SELECT {_TURN_COLS} FROM turns WHERE namespace = ? AND session = ?"  # noqa: S608
        args: list[Any] = [self.ns, session]
        if scopes is not None:
            sql += f" AND scope IN ({_ph(len(scopes))})"
            args.extend(scopes)
        with self.db.read() as c:
            rows = c.execute(sql + " ORDER BY turn_index DESC LIMIT ?",
                             (*args, limit)).fetchall()
        return [_turn(r) for r in reversed(rows)]

    def latest_session(self, scopes: Sequence[str], exclude: str | None = None) -> str | None:
        """The session with the newest turn in ``scopes`` (other than ``exclude``)."""
        with self.db.read() as c:
            row = c.execute(
                f"SELECT session FROM turns WHERE namespace = ? AND scope IN ({_ph(len(scopes))}) "  # noqa: S608,E501
                "AND session != ? ORDER BY coalesce(ts, recorded_at) DESC, id DESC LIMIT 1",
                (self.ns, *scopes, exclude or "")).fetchone()
        return None if row is None else str(row[0])

    def session_has_turns(self, session: str, scopes: Sequence[str] | None = None) -> bool:
        """Whether any raw turn of ``session`` (in ``scopes``, None: any) is stored."""
        sql = "SELECT 1 FROM turns WHERE namespace = ? AND session = ?"
        args: list[Any] = [self.ns, session]
        if scopes is not None:
            sql += f" AND scope IN ({_ph(len(scopes))})"
            args.extend(scopes)
        with self.db.read() as c:
            row = c.execute(sql + " LIMIT 1", args).fetchone()
        return row is not None

    # -- T3: the memory map ---------------------------------------------------------------

    def clusters(self, scopes: Sequence[str], limit: int) -> list[dict[str, Any]] | None:
        """The cluster index sleep built: topic clusters first, then embedding clusters.

        Returns None when no cluster exists yet, so the caller falls back to tags and
        kinds. Each entry: ``source``, ``label`` (or its first keywords), ``size``.
        """
        out: list[dict[str, Any]] = []
        with self.db.read() as c:
            tables = {r[0] for r in c.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN "
                "('topic_clusters', 'emb_clusters')").fetchall()}
            for table in ("topic_clusters", "emb_clusters"):
                if table not in tables:
                    continue
                cols = {r[1] for r in c.execute(f"PRAGMA table_info({table})").fetchall()}
                label = next((x for x in ("label", "keyword", "name", "title") if x in cols),
                             "NULL")
                words = "keywords" if "keywords" in cols else "NULL"
                size = next((x for x in ("size", "count", "members", "n") if x in cols), None)
                if label == "NULL" and words == "NULL":
                    continue
                where, args = [], []
                if "namespace" in cols:
                    where.append("namespace = ?")
                    args.append(self.ns)
                if "scope" in cols:
                    where.append(f"scope IN ({_ph(len(scopes))})")
                    args.extend(scopes)
                sql = (f"SELECT {label}, {words}, {size or 'NULL'} FROM {table}"  # noqa: S608
                       + (f" WHERE {' AND '.join(where)}" if where else "")
                       + (f" ORDER BY {size} DESC" if size else "") + " LIMIT ?")
                try:
                    rows = c.execute(sql, (*args, limit)).fetchall()
                except sqlite3.Error:
                    continue
                for lab, kw, sz in rows:
                    name = str(lab or "").strip()
                    if not name and kw:
                        try:
                            name = ", ".join(str(k) for k in json.loads(kw)[:3])
                        except (ValueError, TypeError):
                            name = str(kw)
                    if name:
                        out.append({"source": table, "label": name, "size": sz})
        return out[:limit] or None

    def tag_counts(self, scopes: Sequence[str], limit: int,
                   sample: int = 5000) -> list[tuple[str, int]]:
        """Most frequent tags of the newest ``sample`` live memories in ``scopes``."""
        with self.db.read() as c:
            rows = c.execute(
                f"SELECT j.value, count(*) AS n FROM (SELECT tags FROM memories "  # noqa: S608
                f"WHERE namespace = ? AND scope IN ({_ph(len(scopes))}) "
                "AND status != 'superseded' ORDER BY recorded_at DESC LIMIT ?) m, "
                "json_each(m.tags) j GROUP BY j.value ORDER BY n DESC, j.value LIMIT ?",
                (self.ns, *scopes, sample, limit)).fetchall()
        return [(str(t), int(n)) for t, n in rows]

    def kind_counts(self, scopes: Sequence[str]) -> list[tuple[str, int]]:
        """Live memories per kind in ``scopes``."""
        with self.db.read() as c:
            rows = c.execute(
                f"SELECT kind, count(*) AS n FROM memories WHERE namespace = ? "  # noqa: S608
                f"AND scope IN ({_ph(len(scopes))}) AND status != 'superseded' "
                "GROUP BY kind ORDER BY n DESC", (self.ns, *scopes)).fetchall()
        return [(str(k), int(n)) for k, n in rows]

    # -- attention (heatmap fallback) -----------------------------------------------------

    def attention_heatmap(self, scopes: Sequence[str], since: float | None,
                          limit: int = 25) -> dict[str, Any]:
        """Which memories/tags recall lights up and which stay dark (from ``attention_log``).

        Groups hits by cluster when the attention rows carry one, else by tag.
        """
        ns = self.ns
        t0 = since if since is not None else 0.0
        with self.db.read() as c:
            by_tier = dict(c.execute(
                "SELECT tier, count(*) FROM attention_log WHERE namespace = ? AND ts >= ? "
                "GROUP BY tier", (ns, t0)).fetchall())
            mem_rows = c.execute(
                f"SELECT a.memory_id, count(*) AS n, avg(a.similarity), max(a.ts), m.gesture, "  # noqa: S608
                f"m.tags, m.scope FROM attention_log a JOIN memories m ON m.id = a.memory_id "
                f"WHERE a.namespace = ? AND a.ts >= ? AND m.scope IN ({_ph(len(scopes))}) "
                "GROUP BY a.memory_id ORDER BY n DESC", (ns, t0, *scopes)).fetchall()
            cluster_rows = c.execute(
                "SELECT cluster, count(*) FROM attention_log WHERE namespace = ? AND ts >= ? "
                "AND cluster IS NOT NULL GROUP BY cluster ORDER BY count(*) DESC",
                (ns, t0)).fetchall()
            all_tags = c.execute(
                f"SELECT j.value, count(*) FROM memories m, json_each(m.tags) j "  # noqa: S608
                f"WHERE m.namespace = ? AND m.scope IN ({_ph(len(scopes))}) "
                "AND m.status != 'superseded' GROUP BY j.value", (ns, *scopes)).fetchall()
            dark = c.execute(
                f"SELECT count(*) FROM memories m WHERE m.namespace = ? "  # noqa: S608
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

    # -- hooks and importers --------------------------------------------------------------

    def existing_message_ids(self, source: str, ids: Iterable[str]) -> set[str]:
        """Which of the source's message ids are already stored as raw turns."""
        wanted = list(dict.fromkeys(ids))
        found: set[str] = set()
        with self.db.read() as c:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                rows = c.execute(
                    f"SELECT message_id FROM turns WHERE namespace = ? AND source = ? "  # noqa: S608
                    f"AND message_id IN ({_ph(len(chunk))})", (self.ns, source, *chunk)).fetchall()
                found.update(str(r[0]) for r in rows)
        return found

    def session_fingerprints(self, session: str) -> set[tuple[str, str]]:
        """(role, text) of every stored turn of a session (to skip re-imported copies)."""
        with self.db.read() as c:
            rows = c.execute("SELECT role, text FROM turns WHERE namespace = ? AND session = ?",
                             (self.ns, session)).fetchall()
        return {(str(r), str(t)) for r, t in rows}

    def changed_since_sleep(self) -> bool:
        """Whether anything but hook bookkeeping was journaled after the last sleep check.

        The checkpoint is the newest ``sleep`` event (written by sleep itself) or
        ``sleep_gate`` event (written by a hook after it ran the gated sleep).
        """
        with self.db.read() as c:
            last = c.execute("SELECT max(id) FROM events WHERE namespace = ? "
                             "AND kind IN ('sleep', 'sleep_gate')", (self.ns,)).fetchone()[0]
            row = c.execute(
                f"SELECT 1 FROM events WHERE namespace = ? AND id > ? "  # noqa: S608
                f"AND kind NOT IN ({_ph(len(_QUIET_KINDS))}) LIMIT 1",
                (self.ns, int(last or 0), *_QUIET_KINDS)).fetchone()
        return row is not None

    def log_event(self, kind: str, data: dict[str, Any]) -> None:
        """Append one journal event in its own short transaction."""
        with self.db.write() as c:
            c.execute("INSERT INTO events(ts, namespace, kind, memory_id, data) VALUES (?,?,?,?,?)",
                      (time.time(), self.ns, kind, None, redact_json(data)))


def read_hermes_sessions(path: Path, *, session: str | None = None,
                         limit: int = 100_000) -> list[dict[str, Any]]:
    """Read Hermes Agent sessions and their messages from its ``state.db`` (read-only).

    Only columns that exist are read, so older and newer Hermes schemas both work.

    Args:
        path: the ``state.db`` file.
        session: only this session id (or unique prefix).
        limit: at most this many sessions, newest first.

    Returns:
        Session dicts (``id``, ``source``, ``started_at``, ``cwd``, ``git_repo_root``,
        ``title``) each with ``messages`` (``id``, ``role``, ``content``, ``tool_name``,
        ``timestamp``), oldest message first.

    Raises:
        NotFound: no such file or session.
        StoreCorrupt: not a Hermes session database.
    """
    if not path.is_file():
        raise NotFound(f"no such file: {path}")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        raise from_sqlite(exc) from exc
    try:
        tables = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
        if not {"sessions", "messages"} <= tables:
            raise StoreCorrupt(f"{path} is not a Hermes session database")
        scols = {r[1] for r in conn.execute("PRAGMA table_info(sessions)").fetchall()}
        mcols = {r[1] for r in conn.execute("PRAGMA table_info(messages)").fetchall()}
        want_s = [c for c in ("id", "source", "started_at", "ended_at", "cwd", "git_repo_root",
                              "title", "parent_session_id") if c in scols]
        want_m = [c for c in ("id", "role", "content", "tool_name", "timestamp", "active")
                  if c in mcols]
        if "id" not in want_s or not {"id", "role", "content"} <= set(want_m):
            raise StoreCorrupt(f"{path}: unexpected Hermes schema")
        order = "started_at DESC" if "started_at" in scols else "rowid DESC"
        sql = f"SELECT {', '.join(want_s)} FROM sessions"  # noqa: S608
        args: list[Any] = []
        if session:
            sql += " WHERE id = ? OR substr(id, 1, ?) = ?"
            args += [session, len(session), session]
        rows = conn.execute(sql + f" ORDER BY {order} LIMIT ?", (*args, limit)).fetchall()
        if session and not rows:
            raise NotFound(f"no Hermes session {session!r} in {path}")
        out: list[dict[str, Any]] = []
        msg_sql = (f"SELECT {', '.join(want_m)} FROM messages WHERE session_id = ? "  # noqa: S608
                   "ORDER BY " + ("timestamp, id" if "timestamp" in mcols else "id"))
        for row in rows:
            sess = dict(zip(want_s, row, strict=True))
            sess["messages"] = [dict(zip(want_m, m, strict=True))
                                for m in conn.execute(msg_sql, (sess["id"],)).fetchall()]
            out.append(sess)
        return out
    except sqlite3.Error as exc:
        raise from_sqlite(exc) from exc
    finally:
        conn.close()

