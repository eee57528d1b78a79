"""Issue 11: one full sleep over the same rows builds the same thing on both backends.

The same memories (texts, tags, roles, times, vectors), raw turns and recall traces are
written to a SQLite store and a PostgreSQL database, one forced sleep runs on each at
the same ``now``, and every table sleep writes is compared: the memories' dynamics,
recurrence, weights and back-filled links, the topic and embedding clusters with their
members and adjacency, the co-recall edges and the entity graph. (Recall itself is left
out: the two lexical indexes rank differently, so recall traffic would differ.)
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from tests.backend import rows
from tests.conftest import hashing

from tideline import Memory
from tideline.bench.sleep import _text
from tideline.models import MemoryRecord, compute_weight
from tideline.sleep.orchestrate import run_sleep
from tideline.store.consolidation import ConsolidationStore

_DAY = 86_400.0
_NOW = time.time()


def _fill(mem: Memory) -> None:
    rng = random.Random(11)
    emb = mem._rt.embedder  # noqa: SLF001 - the test writes rows below the facade
    turns = [{"session": f"s{i % 4}", "role": "user" if i % 2 else "assistant",
              "text": _text(rng, rng.randrange(12)), "timestamp": _NOW - rng.uniform(0, 20) * _DAY,
              "id": f"t{i}"} for i in range(60)]
    turn_ids = mem.add_turns(turns, scope="global", source="test").turn_ids
    records = []
    for _ in range(700):
        topic = rng.randrange(12)
        recorded = _NOW - rng.uniform(0, 20) * _DAY
        imp, emo, unres = rng.randint(1, 5), rng.randint(1, 5), rng.randint(1, 5)
        roles = "Mira=review; Bo=deploy" if rng.random() < 0.1 else ""
        records.append(MemoryRecord(
            id=0, scope=rng.choice(("global", "proj-a")), kind=rng.choice(("fact", "episode")),
            gesture=_text(rng, topic), tags=(f"topic{topic}",) if rng.random() < 0.7 else (),
            entities_role=roles,
            source_links=(rng.choice(turn_ids),) if rng.random() < 0.3 else (),
            importance=imp, emotional=emo, unresolved=unres,
            weight=compute_weight(imp, emo, 1, unres), stability=rng.choice((7.0, 22.7)),
            reinforcements=rng.randint(0, 4),
            last_access=recorded + rng.uniform(0, _NOW - recorded),
            recorded_at=recorded, updated_at=recorded))
    vectors = emb.embed_passages([r.gesture for r in records])
    with mem.store.transaction() as c:
        for rec, vec in zip(records, vectors, strict=True):
            mem.store.insert_memory(c, rec, vec)
    cons = ConsolidationStore(mem.store)
    for i in range(80):  # recall traces: identical hits, so identical eligibility
        hits = [(1 + (i * 7 + j * 13) % 700, 0.9 - j * 0.05, 0.8 - j * 0.05) for j in range(6)]
        cons.record_recall({"query": f"q{i}", "scope": "global"}, hits, "test",
                           _NOW - 3600 + i * 20)


def _rows(mem: Memory, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(round(v, 6) if isinstance(v, float) else
                  bytes(v) if isinstance(v, memoryview) else v for v in r)
            for r in rows(mem, sql)]


_TABLES = {
    "memories": "SELECT id, status, stability, strength, reinforcements, last_access, recurrence,"
                " weight, version, source_links FROM memories ORDER BY id",
    "topic_clusters": "SELECT id, scope, label, keywords, size, df FROM topic_clusters ORDER BY id",
    "topic_members": "SELECT cluster_id, memory_id, score FROM topic_members "
                     "ORDER BY cluster_id, memory_id",
    "emb_clusters": "SELECT id, scope, label, keywords, size, centroid FROM emb_clusters "
                    "ORDER BY id",
    "emb_members": "SELECT memory_id, rank, cluster_id, similarity FROM emb_members "
                   "ORDER BY memory_id, rank",
    "emb_adjacency": "SELECT a, b, shared FROM emb_adjacency ORDER BY a, b",
    "edges": "SELECT src, dst, type, weight FROM edges ORDER BY src, dst, type",
    "entity_nodes": "SELECT entity, mentions, roles, memories FROM entity_nodes ORDER BY entity",
    "memory_keywords": "SELECT memory_id, version, keywords FROM memory_keywords "
                       "ORDER BY memory_id",
}


def test_a_full_sleep_builds_the_same_rows_on_both_backends(tmp_path: Path, pg_url: str) -> None:
    results: dict[str, dict[str, Any]] = {}
    for name, extra in (("sqlite", {}), ("postgres", {"database": pg_url})):
        with Memory.open(tmp_path / name, embedder=hashing(), project="global",
                         **extra) as mem:
            _fill(mem)
            res = run_sleep(mem._rt, force=True, now=_NOW)  # noqa: SLF001 - a fixed now
            assert res["errors"] == {}
            results[name] = {t: _rows(mem, sql) for t, sql in _TABLES.items()}
            results[name]["steps"] = {s: {k: v for k, v in m.items() if k != "ms"}
                                      for s, m in res["steps"].items()}
    sqlite, postgres = results["sqlite"], results["postgres"]
    for table in (*_TABLES, "steps"):
        assert sqlite[table] == postgres[table], table
    assert sqlite["edges"] and sqlite["emb_members"] and sqlite["topic_members"]
    assert any(r[9] != "[]" for r in sqlite["memories"])
    assert sqlite["steps"]["backfill"]["linked"] > 0
    assert sqlite["steps"]["dynamics"]["updated"] > 0
