"""Every reference a store holds resolves: the check after an import that merged."""

from __future__ import annotations

import json
from typing import Any

from tests.backend import rows


def _ids(mem: Any, table: str) -> set[int]:
    return {int(r[0]) for r in rows(mem, f"SELECT id FROM {table}")}  # noqa: S608


def dangling(mem: Any) -> list[str]:
    """Every reference of the store that points at no row (empty: all resolve)."""
    memories, turns = _ids(mem, "memories"), _ids(mem, "turns")
    events, emb, topic = _ids(mem, "events"), _ids(mem, "emb_clusters"), _ids(mem,
                                                                                "topic_clusters")
    threads = _ids(mem, "threads")
    bad: list[str] = []

    def need(what: str, value: Any, among: set[int]) -> None:
        if value is not None and int(value) not in among:
            bad.append(f"{what}={value}")

    for mid, sup, links in rows(mem, "SELECT id, supersedes, source_links FROM memories"):
        need(f"memories[{mid}].supersedes", sup, memories)
        for t in json.loads(links):
            need(f"memories[{mid}].source_links", t, turns)
    for s, d in rows(mem, "SELECT src, dst FROM edges"):
        need("edges.src", s, memories)
        need("edges.dst", d, memories)
    for space, key in rows(mem, "SELECT space, key FROM vectors"):
        need(f"vectors[{space}]", key, memories if space.startswith("m:") else turns)
    for mid, near in rows(mem, "SELECT memory_id, nearest FROM write_keys"):
        need("write_keys.memory_id", mid, memories)
        need("write_keys.nearest", near, memories)
    for (mid,) in rows(mem, "SELECT memory_id FROM memory_keywords"):
        need("memory_keywords", mid, memories)
    for eid, kind, mid, data in rows(mem, "SELECT id, kind, memory_id, data FROM events"):
        need(f"events[{eid}].memory_id", mid, memories)
        d = json.loads(data)
        for key in ("old", "new", "nearest"):
            if isinstance(d.get(key), int):
                need(f"events[{eid}].{key}", d[key], memories)
        for key in ("ids", "memory_ids"):
            for i in d.get(key) or []:
                need(f"events[{eid}].{key}", i, memories)
        if kind == "thread":
            need(f"events[{eid}].id", d.get("id"), threads)
    for mid, cl in rows(mem, "SELECT memory_id, cluster FROM attention_log"):
        need("attention_log.memory_id", mid, memories)
        need("attention_log.cluster", cl, emb)
    for rid, mid in rows(mem, "SELECT recall_id, memory_id FROM eligibility"):
        need("eligibility.recall_id", rid, events)
        need("eligibility.memory_id", mid, memories)
    for (src,) in rows(mem, "SELECT source_memories FROM threads"):
        for i in json.loads(src):
            need("threads.source_memories", i, memories)
    for c, m in rows(mem, "SELECT cluster_id, memory_id FROM topic_members"):
        need("topic_members.cluster_id", c, topic)
        need("topic_members.memory_id", m, memories)
    for m, c in rows(mem, "SELECT memory_id, cluster_id FROM emb_members"):
        need("emb_members.memory_id", m, memories)
        need("emb_members.cluster_id", c, emb)
    for a, b in rows(mem, "SELECT a, b FROM emb_adjacency"):
        need("emb_adjacency.a", a, emb)
        need("emb_adjacency.b", b, emb)
    for (ms,) in rows(mem, "SELECT memories FROM entity_nodes"):
        for i in json.loads(ms):
            need("entity_nodes.memories", i, memories)
    return bad


def counts(mem: Any) -> dict[str, int]:
    """Rows per table of the tables an import adds to."""
    tables = ("memories", "turns", "edges", "vectors", "events", "threads", "attention_log",
              "eligibility", "profiles", "self_concept", "retention_snapshots")
    return {t: int(rows(mem, f"SELECT count(*) FROM {t}")[0][0]) for t in tables}  # noqa: S608
