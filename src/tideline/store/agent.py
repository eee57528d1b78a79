"""SQL for agent integration: the injection tiers, hooks and importers.

Portable SQL (see :mod:`tideline.store.dialect`) over a backend's database object,
with no numpy and no embedder, so a hook (``session-start``, a ``stop`` with nothing
new) can read what it needs in a few milliseconds without loading the model. The
facade (:class:`tideline.Memory`) uses the same reader over its own connection.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from tideline.store.database import Database
from tideline.store.events import append_event, changed_since_sleep
from tideline.store.sql import placeholders as _ph
from tideline.times import clamped_time, stored_time

__all__ = ["AgentReader"]

#: The longest message id a look-up compares (one longer is refused when stored anyway:
#: this only keeps a hostile transcript's id from costing more than its check).
_ID_CHARS = 10_000

_MEMORY_COLS = ("id, scope, kind, gesture, context, cognition_direction, tags, weight, status, "
                "event_time, recorded_at, source_links")
_TURN_COLS = ("id, session, turn_index, speaker, role, text, ts, source, message_id, scope, "
              "recorded_at")


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

    Opened without the embedder by :func:`tideline.store.open_agent_reader`; the
    facade's stores hand one over their own connection (``store.agent``).

    Args:
        db: an open database.
        namespace: the namespace to read.
    """

    def __init__(self, db: Database, namespace: str) -> None:
        self.db = db
        self.ns = namespace

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
                f"SELECT count(*) FROM memories WHERE namespace = ? AND scope IN ({_ph(len(scopes))}) "  # noqa: E501
                "AND status NOT IN ('superseded')", (ns, *scopes)).fetchone()[0]
            by_status = dict(c.execute(
                f"SELECT status, count(*) FROM memories WHERE namespace = ? AND scope IN ({_ph(len(scopes))}) "  # noqa: E501
                "GROUP BY status", (ns, *scopes)).fetchall())
            turns, sessions = c.execute(
                "SELECT count(*), count(DISTINCT session) FROM turns WHERE namespace = ?",
                (ns,)).fetchone()
            last = c.execute(
                f"SELECT session, coalesce(ts, recorded_at) AS t FROM turns WHERE namespace = ? "
                f"AND scope IN ({_ph(len(scopes))}) ORDER BY t DESC LIMIT 1",
                (ns, *scopes)).fetchone()
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
                f"SELECT {_MEMORY_COLS} FROM memories WHERE namespace = ? "
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
                f"SELECT max(coalesce(ts, recorded_at)) FROM turns WHERE namespace = ? "
                f"AND scope IN ({_ph(len(scopes))}) AND session != ?",
                (ns, *scopes, excl)).fetchone()[0]
            if newest is None:
                return None
            start = clamped_time(newest) - window_s
            sessions = c.execute(
                f"SELECT session, max(coalesce(ts, recorded_at)) AS last FROM turns "
                f"WHERE namespace = ? AND scope IN ({_ph(len(scopes))}) AND session != ? "
                "AND coalesce(ts, recorded_at) >= ? GROUP BY session ORDER BY last DESC LIMIT 200",
                (ns, *scopes, excl, start)).fetchall()
            if not sessions:
                return None
            names = [s for s, _ in sessions]
            # A memory linked to a turn of the window was recorded after that turn, so only
            # memories recorded since the window opened are read (indexed; no full scan).
            best = c.execute(
                f"SELECT t.session, m.id, m.weight FROM memories m CROSS JOIN "
                f"{self.db.dialect.json_items('m.source_links', 'j')} "
                f"JOIN turns t ON t.id = CAST(j.value AS BIGINT) "
                f"WHERE m.namespace = ? AND m.recorded_at >= ? "
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
        sql = f"SELECT {_TURN_COLS} FROM turns WHERE namespace = ? AND session = ?"
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
                f"SELECT session FROM turns WHERE namespace = ? AND scope IN ({_ph(len(scopes))}) "  # noqa: E501
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
            for table in ("topic_clusters", "emb_clusters"):
                rows = c.execute(
                    f"SELECT label, keywords, size FROM {table} WHERE namespace = ? "
                    f"AND scope IN ({_ph(len(scopes))}) ORDER BY size DESC LIMIT ?",
                    (self.ns, *scopes, limit)).fetchall()
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
                f"SELECT j.value, count(*) AS n FROM (SELECT tags FROM memories "
                f"WHERE namespace = ? AND scope IN ({_ph(len(scopes))}) "
                "AND status != 'superseded' ORDER BY recorded_at DESC LIMIT ?) m, "
                f"{self.db.dialect.json_items('m.tags', 'j')} "
                "GROUP BY j.value ORDER BY n DESC, j.value LIMIT ?",
                (self.ns, *scopes, sample, limit)).fetchall()
        return [(str(t), int(n)) for t, n in rows]

    def kind_counts(self, scopes: Sequence[str]) -> list[tuple[str, int]]:
        """Live memories per kind in ``scopes``."""
        with self.db.read() as c:
            rows = c.execute(
                f"SELECT kind, count(*) AS n FROM memories WHERE namespace = ? "
                f"AND scope IN ({_ph(len(scopes))}) AND status != 'superseded' "
                "GROUP BY kind ORDER BY n DESC", (self.ns, *scopes)).fetchall()
        return [(str(k), int(n)) for k, n in rows]

    # -- hooks and importers --------------------------------------------------------------

    def existing_message_ids(self, source: str,
                             keys: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which (scope, message id) pairs of the source are already stored as raw turns.

        The ids are the source's own (raw): each is compared in the form it is stored as
        (:func:`tideline.write.identity.stored_identity`), within its scope only, so an
        id another project holds is not "stored" here. An id that could not be stored
        at all (empty, too long) is never found; storing it is what refuses it.
        """
        from tideline.errors import InvalidInput
        from tideline.write.identity import clean_identity

        stored: dict[tuple[str, str], tuple[str, str]] = {}
        for scope, raw in keys:
            try:
                stored.setdefault((scope, clean_identity(raw, "id", _ID_CHARS)), (scope, raw))
            except InvalidInput:
                continue
        wanted = list(stored)
        found: set[tuple[str, str]] = set()
        with self.db.read() as c:
            for start in range(0, len(wanted), 250):
                chunk = wanted[start:start + 250]
                where = " OR ".join(["(scope = ? AND message_id = ?)"] * len(chunk))
                rows = c.execute(
                    f"SELECT scope, message_id FROM turns WHERE namespace = ? AND source = ? "  # noqa: S608
                    f"AND ({where})", (self.ns, source, *(v for k in chunk for v in k)),
                ).fetchall()
                found.update(stored[(str(s), str(m))] for s, m in rows
                             if (str(s), str(m)) in stored)
        return found

    def session_fingerprints(self, session: str) -> set[tuple[str, str]]:
        """(role, text) of every stored turn of a session (to skip re-imported copies)."""
        with self.db.read() as c:
            rows = c.execute("SELECT role, text FROM turns WHERE namespace = ? AND session = ?",
                             (self.ns, session)).fetchall()
        return {(str(r), str(t)) for r, t in rows}

    def changed_since_sleep(self) -> bool:
        """Whether anything but hook bookkeeping was journaled after the last sleep check
        (see :func:`tideline.store.events.changed_since_sleep`)."""
        with self.db.read() as c:
            return changed_since_sleep(c, self.ns)

    def log_event(self, kind: str, data: dict[str, Any]) -> None:
        """Append one journal event in its own short transaction."""
        with self.db.write() as c:
            append_event(c, self.ns, kind, data)
