"""The report as one project may read it: the parts that carry words keep to its scopes.

The report (:func:`tideline.report.build.build_report`) reads the whole namespace; read
on behalf of a project (``Memory.report()`` inside project A) it must not show another
project's memories, topic or cluster labels, entities, hook errors or its name (issue
33 item 3). The sections that show texts are cut here to the reader's scopes; the time
series stay aggregate counts of the namespace (numbers under fixed names: gate
decisions, recall latency, retention), which name nothing of anyone's.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

__all__ = ["scoped_report"]


def _items(items: list[dict[str, Any]], scopes: Collection[str]) -> list[dict[str, Any]]:
    return [i for i in items if i.get("scope") in scopes]


def _entities(graph: dict[str, list[dict[str, Any]]], visible_ids: set[int],
              ) -> dict[str, list[dict[str, Any]]]:
    """Entities named by a memory the reader may see, counted over those memories only;
    roles (free text of every project) are left out."""
    nodes = []
    for node in graph.get("nodes", []):
        mine = [m for m in node.get("memories", []) if m in visible_ids]
        if mine:
            nodes.append({"entity": node["entity"], "mentions": len(mine), "roles": {},
                          "memories": mine})
    kept = {n["entity"] for n in nodes}
    edges = [{"a": e["a"], "b": e["b"], "count": e["count"], "role_pairs": {}}
             for e in graph.get("edges", []) if e["a"] in kept and e["b"] in kept]
    return {"nodes": nodes, "edges": edges}


def scoped_report(report: dict[str, Any], scopes: Collection[str],
                  visible_ids: set[int]) -> dict[str, Any]:
    """Cut the word-bearing sections of a whole-namespace report to ``scopes``.

    Args:
        report: the report of the whole namespace (its ``totals`` already counted over
            ``scopes``, its attention, clusters and topics already read for them).
        scopes: the scopes the reader may see.
        visible_ids: ids of the memories of those scopes among the ones the report names.
    """
    out = dict(report)
    reinforced = report.get("reinforced", {})
    out["reinforced"] = {k: _items(v, scopes) for k, v in reinforced.items()}
    fading = dict(report.get("fading", {}))
    fading["lowest_retention"] = _items(fading.get("lowest_retention", []), scopes)
    out["fading"] = fading
    assoc = dict(report.get("associations", {}))
    assoc["strongest"] = [a for a in assoc.get("strongest", [])
                          if a["src"] in visible_ids and a["dst"] in visible_ids]
    out["associations"] = assoc
    out["clusters"] = {"points": _items(report.get("clusters", {}).get("points", []), scopes)}
    out["entities"] = _entities(report.get("entities", {}), visible_ids)
    return out
