"""Embedding soft clusters, adjacency, query routing, attention heatmap."""

from __future__ import annotations

import json
import random

import numpy as np
from tests.backend import rows as fetch_rows
from tests.backend import scalar

from tideline import Memory
from tideline.recall.routing import ClusterRouter
from tideline.sleep.soft_clusters import cluster_count
from tideline.store.consolidation import ConsolidationStore

TOPICS = {
    "databases": "postgres replica vacuum index query planner wal checkpoint",
    "music": "violin cello rehearsal concert orchestra tempo score",
    "garden": "tomato compost seedling soil mulch watering greenhouse",
    "travel": "train ticket airport passport hotel luggage itinerary",
}


def populate(mem: Memory, per: int = 12, scope: str | None = None) -> dict[str, list[int]]:
    rng = random.Random(5)
    out: dict[str, list[int]] = {}
    for topic, words in TOPICS.items():
        vocab = words.split()
        for i in range(per):
            text = " ".join(rng.sample(vocab, 4)) + f" note{topic[:3]}{i}"
            out.setdefault(topic, []).append(mem.write(text, scope=scope, tags=[topic]).id)
    return out


def memberships(mem: Memory) -> dict[int, list[tuple[int, int, float]]]:
    out: dict[int, list[tuple[int, int, float]]] = {}
    for m, r, k, s in fetch_rows(mem, "SELECT memory_id, rank, cluster_id, similarity "
                                "FROM emb_members ORDER BY memory_id, rank"):
        out.setdefault(int(m), []).append((int(r), int(k), float(s)))
    return out


def test_k_follows_the_seed_formula() -> None:
    assert [cluster_count(n) for n in (0, 1, 4, 10, 100, 10_000, 100_000)] == \
        [0, 1, 4, 5, 15, 150, 474]


def test_each_memory_sits_in_its_three_nearest_clusters(mem: Memory) -> None:
    groups = populate(mem)
    n = len({m for v in groups.values() for m in v})
    res = mem.sleep(only="clusters")["steps"]["clusters"]
    assert res["rebuilt"] == 1 and res["k"] == cluster_count(n)
    assert 4 <= res["clusters"] <= res["k"]  # a centroid nobody is near is dropped
    mm = memberships(mem)
    assert len(mm) == n and all(len(v) == 3 for v in mm.values())
    for rows in mm.values():
        sims = [s for _, _, s in rows]
        assert sims == sorted(sims, reverse=True) and len({k for _, k, _ in rows}) == 3
    # Home clusters follow the topics.
    homes = {t: {mm[m][0][1] for m in ids} for t, ids in groups.items()}
    for t, hs in homes.items():
        others = set().union(*(h for u, h in homes.items() if u != t))
        assert hs - others, t
    # Adjacency: shared memberships, symmetric.
    cons = ConsolidationStore(mem.store)
    ids = [c["id"] for c in cons.emb_clusters()]
    adj = cons.adjacency_rows(ids)
    shared: dict[tuple[int, int], int] = {}
    for rows in mm.values():
        ks = sorted(k for _, k, _ in rows)
        for i in range(3):
            for j in range(i + 1, 3):
                shared[(ks[i], ks[j])] = shared.get((ks[i], ks[j]), 0) + 1
    assert {(a, b): n for a, b, n in adj} == shared
    both = scalar(mem, "SELECT count(*) FROM emb_adjacency")
    assert both == 2 * len(adj)


def test_ids_are_stable_and_new_memories_are_assigned_incrementally(mem: Memory) -> None:
    populate(mem)
    mem.sleep(only="clusters")
    cons = ConsolidationStore(mem.store)
    first = {c["id"]: c["label"] for c in cons.emb_clusters()}
    mem.sleep(only="clusters", force=True)
    assert {c["id"] for c in cons.emb_clusters()} == set(first)
    new = mem.write("cello concert rehearsal with the orchestra tonight").id
    res = mem.sleep(only="clusters")["steps"]["clusters"]
    assert res["rebuilt"] == 0 and res["extended"] == 1 and res["assigned"] == 1
    assert len(memberships(mem)[new]) == 3
    assert any("violin" in c["keywords"] or "cello" in c["keywords"]
               for c in cons.emb_clusters())


def test_clusters_never_mix_scopes_and_routing_respects_them(mem: Memory) -> None:
    populate(mem, per=8, scope="atlas")
    populate(mem, per=8, scope="orchard")
    mem.sleep()
    cons = ConsolidationStore(mem.store)
    by_id = {c["id"]: c["scope"] for c in cons.emb_clusters()}
    scope_of = {r.id: r.scope for r in mem.store.list_memories(limit=1000)}
    for mid, rows in memberships(mem).items():
        assert {by_id[k] for _, k, _ in rows} == {scope_of[mid]}
    router = ClusterRouter(mem.store, mem.embedder.dim, mem.config.sleep)
    qv = mem.embedder.embed_query("violin rehearsal tempo")
    routed = router.route(qv, ["atlas", "global"], set())
    assert routed and {r.scope for r, _ in routed} == {"atlas"}
    assert all(abs(s - float(np.dot(mem.store.memory_vectors([r], mem.embedder.dim)[r.id], qv)))
               < 1e-5 for r, s in routed[:3])
    for _ in range(3):
        packet = mem.recall("violin rehearsal tempo", scope="atlas", limit=20)
        assert {i.scope for i in packet.items} <= {"atlas", "global"}


def test_routing_adds_adjacent_cluster_members_as_graph_candidates(mem: Memory) -> None:
    populate(mem)
    mem.sleep()
    router = ClusterRouter(mem.store, mem.embedder.dim, mem.config.sleep)
    qv = mem.embedder.embed_query("compost soil seedling")
    cons = ConsolidationStore(mem.store)
    cids = [c["id"] for c in cons.emb_clusters()]
    routed = router.route(qv, ["global"], set())
    homes = {m: rows[0][1] for m, rows in memberships(mem).items()}
    assert len({homes[r.id] for r, _ in routed}) >= 2  # more than the nearest cluster
    assert set(homes[r.id] for r, _ in routed) <= set(cids)
    known = {r.id for r, _ in routed}
    assert not {r.id for r, _ in router.route(qv, ["global"], known)} & known


def test_attention_logs_clusters_and_the_heatmap_finds_deserts(mem: Memory) -> None:
    populate(mem)
    mem.recall("postgres vacuum")  # before clustering: no cluster yet
    mem.sleep()
    for _ in range(4):
        mem.recall("violin cello concert")
    logged = fetch_rows(mem, "SELECT cluster FROM attention_log ORDER BY id")
    assert logged and all(r[0] is not None for r in logged)  # early rows back-filled by sleep
    heat = mem.attention_heatmap(top=50)
    json.dumps(heat)
    assert heat["total_hits"] == len(logged) and heat["unclustered_hits"] == 0
    assert "by_tag" not in heat  # clusters exist: the tag grouping steps aside
    lit = heat["lit"][0]
    assert lit["hits"] >= 4 and lit["heat"] == 1.0
    assert any(w in lit["label"] for w in ("violin", "cello", "concert", "music"))
    assert heat["deserts"] and all(d["hits"] == 0 for d in heat["deserts"])
    assert heat["lit_count"] + len([c for c in heat["clusters"] if not c["hits"]]) == \
        heat["clusters_total"]
    grid = heat["grid"]
    assert len(grid["days"]) == 30 and sum(grid["rows"][0]["counts"]) == lit["hits"]
    step = mem.sleep(only="attention")["steps"]["attention"]
    assert step["hits"] == heat["total_hits"] and step["lit"] == heat["lit_count"]
