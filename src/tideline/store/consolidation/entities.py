"""The SQL of the entity step: the memories that name anyone, and the entity graph."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tideline.store.consolidation.state import SleepView

__all__ = ["EntityRows"]


class EntityRows(SleepView):
    """Entity mentions and the entity graph of one namespace."""

    # -- entity graph -------------------------------------------------------------------

    def entity_rows(self) -> list[tuple[int, str, str]]:
        """(id, entities_role, related_entities) of live rows that name anyone."""
        with self.db.read() as c:
            rows = c.execute(
                "SELECT id, entities_role, related_entities FROM memories WHERE namespace = ? "
                "AND status != 'superseded' AND (entities_role != '' OR related_entities != '[]')"
                " ORDER BY id", (self.ns,)).fetchall()
        return [(int(a), str(b), str(c_)) for a, b, c_ in rows]

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
