"""Profiles (per entity), self-concept and threads: the slow-changing self-model.

Every update carries an optional expected version so that a long consolidation
(an LLM call between read and write) cannot erase what was written meanwhile.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tideline.errors import Conflict, NotFound
from tideline.store.view import NamespaceView

__all__ = ["CognitionStore", "PROFILE_FACETS", "SELF_FACETS"]

#: The facets of a profile and of the self-concept.
PROFILE_FACETS = ("fact", "impression", "relationship")
SELF_FACETS = ("fact", "terrain", "reflection")


class CognitionStore(NamespaceView):
    """SQL for profiles, self-concept and threads of one namespace."""

    # -- profiles -------------------------------------------------------------------------

    def profiles(self, entity: str | None = None) -> list[dict[str, Any]]:
        """Profile facets, optionally of one entity, ordered by entity and facet."""
        sql = ("SELECT entity, facet, content, version, updated_at FROM profiles "
               "WHERE namespace = ?")
        args: list[Any] = [self.ns]
        if entity is not None:
            sql += " AND entity = ?"
            args.append(entity)
        with self.store.db.read() as c:
            rows = c.execute(sql + " ORDER BY entity, facet", args).fetchall()
        return [{"entity": e, "facet": f, "content": t, "version": v, "updated_at": u}
                for e, f, t, v, u in rows]

    def put_profile(self, entity: str, facet: str, content: str,
                    expected_version: int | None = None) -> dict[str, Any]:
        """Create or replace one profile facet.

        Raises:
            Conflict: ``expected_version`` is given and differs from the stored one.
        """
        now = time.time()
        with self.store.db.write() as c:
            row = c.execute("SELECT version FROM profiles WHERE namespace = ? AND entity = ? "
                            "AND facet = ?", (self.ns, entity, facet)).fetchone()
            current = int(row[0]) if row else 0
            if expected_version is not None and expected_version != current:
                raise Conflict(f"profile {entity}/{facet} is at version {current}, "
                               f"not {expected_version}")
            c.execute(
                "INSERT INTO profiles(namespace, entity, facet, content, updated_at, version) "
                "VALUES (?,?,?,?,?,1) ON CONFLICT(namespace, entity, facet) DO UPDATE SET "
                "content = excluded.content, updated_at = excluded.updated_at, "
                "version = profiles.version + 1",
                (self.ns, entity, facet, content, now),
            )
            self.store.log_event(c, "profile", {"entity": entity, "facet": facet,
                                                "version": current + 1}, now=now)
        return {"entity": entity, "facet": facet, "content": content, "version": current + 1}

    # -- self-concept ---------------------------------------------------------------------

    def self_concept(self) -> list[dict[str, Any]]:
        """The self-concept facets (fact, terrain, reflection) that exist."""
        with self.store.db.read() as c:
            rows = c.execute("SELECT facet, content, version, updated_at FROM self_concept "
                             "WHERE namespace = ? ORDER BY facet", (self.ns,)).fetchall()
        return [{"facet": f, "content": t, "version": v, "updated_at": u} for f, t, v, u in rows]

    def put_self_concept(self, facet: str, content: str,
                         expected_version: int | None = None) -> dict[str, Any]:
        """Create or replace one self-concept facet.

        Raises:
            Conflict: ``expected_version`` is given and differs from the stored one.
        """
        now = time.time()
        with self.store.db.write() as c:
            row = c.execute("SELECT version FROM self_concept WHERE namespace = ? AND facet = ?",
                            (self.ns, facet)).fetchone()
            current = int(row[0]) if row else 0
            if expected_version is not None and expected_version != current:
                raise Conflict(f"self_concept/{facet} is at version {current}, "
                               f"not {expected_version}")
            c.execute(
                "INSERT INTO self_concept(namespace, facet, content, updated_at, version) "
                "VALUES (?,?,?,?,1) ON CONFLICT(namespace, facet) DO UPDATE SET "
                "content = excluded.content, updated_at = excluded.updated_at, "
                "version = self_concept.version + 1",
                (self.ns, facet, content, now),
            )
            self.store.log_event(c, "self_concept", {"facet": facet, "version": current + 1},
                                 now=now)
        return {"facet": facet, "content": content, "version": current + 1}

    # -- threads --------------------------------------------------------------------------

    def threads(self, status: str | None = "open", limit: int = 50) -> list[dict[str, Any]]:
        """Threads (open exploration directions), newest first."""
        sql = ("SELECT id, title, body, status, source_memories, created_at, updated_at "
               "FROM threads WHERE namespace = ?")
        args: list[Any] = [self.ns]
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        with self.store.db.read() as c:
            rows = c.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
        return [{"id": i, "title": t, "body": b, "status": s, "source_memories": json.loads(m),
                 "created_at": ca, "updated_at": ua} for i, t, b, s, m, ca, ua in rows]

    def add_thread(self, title: str, body: str, source_memories: list[int]) -> int:
        """Open a thread; returns its id."""
        now = time.time()
        with self.store.db.write() as c:
            cur = c.execute(
                "INSERT INTO threads(namespace, title, body, source_memories, created_at, "
                "updated_at) VALUES (?,?,?,?,?,?) RETURNING id",
                (self.ns, title, body, json.dumps(source_memories), now, now),
            )
            tid = int(cur.fetchone()[0])
            self.store.log_event(c, "thread", {"id": tid, "title": title}, now=now)
        return tid

    def close_thread(self, thread_id: int) -> None:
        """Close a thread.

        Raises:
            NotFound: no such thread.
        """
        with self.store.db.write() as c:
            cur = c.execute("UPDATE threads SET status = 'closed', updated_at = ? "
                            "WHERE id = ? AND namespace = ?", (time.time(), thread_id, self.ns))
            if not cur.rowcount:
                raise NotFound(f"no thread with id {thread_id}")
