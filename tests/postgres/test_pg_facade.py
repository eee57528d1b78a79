"""Issue 11, "Everything works on both": the facade on a real PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.backend import rows, run_all, scalar
from tests.conftest import hashing

from tideline import Memory
from tideline.errors import EmbedderMismatch, NotFound
from tideline.models import LexicalQuery, WriteResult
from tideline.store.postgres.schema import SCHEMA_VERSION


def test_schema_version_and_marker_live_in_the_database(pg_mem: Memory, pg_url: str,
                                                        tmp_path: Path) -> None:
    info = pg_mem.introspect()
    assert info["schema_version"] == SCHEMA_VERSION and info["database"].startswith("postgresql://")
    assert pg_mem.store.backend == "postgresql"
    assert scalar(pg_mem, "SELECT value FROM db_meta WHERE key = 'embedder'") == (
        pg_mem.embedder.marker)
    # Another host (another local directory) opening the same database sees it.
    with Memory.open(tmp_path / "other-host", database=pg_url, embedder=hashing(),
                     project="global") as other:
        other.remember("written from the second host")
    assert pg_mem.introspect()["memories"] == 1


def test_embedder_marker_is_checked(pg_mem: Memory, pg_url: str, tmp_path: Path) -> None:
    from tideline.embed import HashingEmbedder

    other = HashingEmbedder(dim=64)
    with pytest.raises(EmbedderMismatch):
        Memory.open(tmp_path / "x", database=pg_url, embedder=other, project="global")


def test_remember_is_idempotent_and_gated(pg_mem: Memory) -> None:
    first = pg_mem.remember("the staging database moved to host pg-7", idempotency_key="k1")
    again = pg_mem.remember("the staging database moved to host pg-7", idempotency_key="k1")
    assert again.replayed and again.id == first.id
    same = pg_mem.remember("the staging database moved to host pg-7")
    assert same.decision in ("potentiate", "new", "link")
    assert pg_mem.introspect()["memories"] in (1, 2)
    rec = pg_mem.get(first.id)
    assert rec.gesture == "the staging database moved to host pg-7"
    assert [e["kind"] for e in pg_mem.events(kinds=["write"])]


def test_concurrent_writers_of_one_key_store_one_memory(pg_url: str, tmp_path: Path) -> None:
    """Two connections racing on one idempotency key: the key lock makes one of them
    replay the other's outcome (SQLite gets this from its single writer)."""
    import threading

    mems = [Memory.open(tmp_path / f"h{i}", database=pg_url, embedder=hashing(),
                        project="global") for i in range(2)]
    results: dict[int, list[WriteResult]] = {n: [] for n in range(20)}
    try:
        barrier = threading.Barrier(2)

        def write(m: Memory) -> None:
            barrier.wait()
            for n in range(20):
                results[n].append(m.remember(f"fact number {n} about the racing writers",
                                             idempotency_key=f"race-{n}"))

        threads = [threading.Thread(target=write, args=(m,)) for m in mems]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for pair in results.values():
            assert len(pair) == 2 and pair[0].id == pair[1].id
            assert sorted(r.replayed for r in pair) == [False, True]
        keys = scalar(mems[0], "SELECT count(*) FROM write_keys WHERE key LIKE 'race-%'")
        assert keys == 20
    finally:
        for m in mems:
            m.close()


def test_turns_and_lexical_recall_cjk_and_identifiers(pg_mem: Memory) -> None:
    res = pg_mem.add_turns([
        {"speaker": "Ann", "text": "the nightly build broke with E4521 again"},
        {"speaker": "Bo", "text": "我们在北京大学讨论了边界问题"},
        {"speaker": "Ann", "text": "the whale-listen service needs a restart"},
    ], session="s1")
    assert res.inserted == 3
    again = pg_mem.add_turns([{"speaker": "Ann", "text": "the nightly build broke with E4521 "
                                                       "again"}], session="s1")
    assert again.inserted == 0 and again.skipped == 1
    assert [t.turn_index for t in pg_mem.store.session_turns("s1")] == [0, 1, 2]
    pg_mem.remember("error E4521 means the CSV header changed")
    pg_mem.remember("边界问题要和北京团队一起讨论")
    pg_mem.remember("restart whale-listen with systemctl")
    for query, needle in (("E4521", "E4521"), ("北京", "北京"), ("边界", "边界"),
                          ("whale-listen", "whale-listen"), ("e4521", "E4521")):
        items = pg_mem.recall(query, include_turns=True).items
        assert items and needle in items[0].text, (query, [i.text for i in items])
    store = pg_mem.store
    words = store.search_memories(LexicalQuery("北京"), substrings=False, scopes=["global"],
                                  limit=5)
    subs = store.search_memories(LexicalQuery("whale-listen"), substrings=True,
                                 scopes=["global"], limit=5)
    turns = store.search_turns(LexicalQuery("E4521"), substrings=True, scopes=["global"],
                               limit=5)
    texts = {i: r.text for i, r in store.get_memories([i for i, _ in words + subs]).items()}
    assert "北京" in texts[words[0][0]] and "whale-listen" in texts[subs[0][0]]
    assert "E4521" in store.get_turns([turns[0][0]])[turns[0][0]].text
    # Syntax of either query language is only ever text.
    for hostile in ("a & b | !c", "'E4521' <-> x:*", "50% _x_ \\", "NEAR(a b)"):
        store.search_memories(LexicalQuery(hostile), substrings=False, scopes=["global"],
                              limit=5)
        store.search_memories(LexicalQuery(hostile), substrings=True, scopes=["global"],
                              limit=5)


def test_a_like_wildcard_in_a_query_is_a_plain_character(pg_mem: Memory) -> None:
    pg_mem.remember("the 100%_done flag is set")
    pg_mem.remember("the 1000 done flags are set")
    store = pg_mem.store
    hits = store.search_memories(LexicalQuery("100%_done"), substrings=True,
                                 scopes=["global"], limit=5)
    texts = [store.get_memory(i).text for i, _ in hits]
    assert texts == ["the 100%_done flag is set"]


def test_vector_recall_with_a_selective_scope_filter_returns_k(pg_url: str,
                                                               tmp_path: Path) -> None:
    """3 memories of a small project among 400 of another: a filtered HNSW scan (iterative,
    with the exact fallback) still returns all of the small project's rows."""
    with Memory.open(tmp_path / "l", database=pg_url, embedder=hashing(),
                     project="big") as mem:
        for i in range(400):
            mem.remember(f"big project note {i} on topic {i % 37} and item {i * 13}")
        small = [mem.remember(f"tiny project fact {i} about bread", scope="tiny").id
                 for i in range(3)]
        query = mem.embedder.embed_query("bread")
        hits = mem.vectors.search("m", ["tiny"], np.asarray(query), 10)
        assert set(hits) == set(small)
        big = mem.vectors.search("m", ["big"], np.asarray(query), 10)
        assert len(big) == 10 and not set(big) & set(small)
        assert all(-1.0 <= s <= 1.0 for s in big.values())


def test_scopes_and_namespaces_are_isolated(pg_url: str, tmp_path: Path) -> None:
    with Memory.open(tmp_path / "l", database=pg_url, embedder=hashing(),
                     project="alpha") as a:
        secret = a.remember("alpha's deploy token rotation is on Fridays").id
        with Memory.open(tmp_path / "l", database=pg_url, embedder=hashing(),
                         project="beta") as b:
            assert not [i for i in b.recall("deploy token rotation Fridays").items
                        if i.id == secret]
            with pytest.raises(NotFound):
                b.get(secret)
        with Memory.open(tmp_path / "l", database=pg_url, embedder=hashing(),
                         namespace="other", project="alpha") as other:
            assert other.introspect()["memories"] == 0
            assert not other.recall("deploy token rotation Fridays").items
            with pytest.raises(NotFound):
                other.get(secret)
        assert a.store.scopes() == ["alpha"]


def test_edges_revise_forget_reflect_show(pg_mem: Memory) -> None:
    first = pg_mem.remember("the loader reads CSV files from the inbox bucket")
    linked = pg_mem.remember("weekly backups are copied to cold storage on Sundays")
    new = pg_mem.revise(first.id, "the loader reads CSV and JSON files from the inbox bucket")
    shown = pg_mem.show(new.id)
    assert shown["history"] and shown["history"][0]["id"] == first.id
    assert any(e["type"] == "supersedes" for e in shown["edges"])
    assert pg_mem.reflect([new.id], 0.5)["updated"] == [new.id]
    assert pg_mem.get(new.id).reinforcements >= 1
    assert pg_mem.forget(linked.id)["forgotten"] == linked.id
    with pytest.raises(NotFound):
        pg_mem.get(linked.id)
    stats = pg_mem.introspect()
    assert stats["by_status"].get("superseded") == 1 and stats["edges"]["supersedes"] == 1
    kinds = {e["kind"] for e in pg_mem.events(limit=100)}
    assert {"write", "forget", "reflect"} <= kinds


def test_cognition_rows(pg_mem: Memory) -> None:
    pg_mem.update_profile("Ann", "fact", "drinks tea")
    pg_mem.update_self_concept("terrain", "data pipelines")
    tid = pg_mem.add_thread("why did E4521 come back", "ask upstream")
    assert pg_mem.profiles("Ann")[0]["content"] == "drinks tea"
    assert pg_mem.self_concept()[0]["content"] == "data pipelines"
    assert pg_mem.threads()[0]["id"] == tid


def test_doctor_and_repair_of_the_derived_indexes(pg_mem: Memory) -> None:
    pg_mem.remember("doctor checks the word index of E4521")
    pg_mem.add_turns([{"speaker": "Ann", "text": "and the turn index"}], session="d")
    assert pg_mem.doctor()["ok"]
    run_all(pg_mem, [("DELETE FROM memories_lex", ()),
                     ("DELETE FROM vectors WHERE substr(space, 1, 2) = 't:'", ())])
    found = pg_mem.doctor()
    assert not found["ok"] and {"parity:memories_lex", "parity:vectors"} <= set(
        found["problems"])
    fixed = pg_mem.doctor(repair=True)
    assert fixed["ok"], fixed
    assert pg_mem.recall("E4521").items


def test_reembed_swaps_every_vector_and_the_marker(pg_mem: Memory) -> None:
    from tideline.embed import HashingEmbedder

    pg_mem.remember("reembed me on PostgreSQL")
    pg_mem.add_turns([{"speaker": "Ann", "text": "and me too"}], session="r")
    new = HashingEmbedder(dim=64)
    res = pg_mem.reembed(new)
    assert res["memories"] == 1 and res["turns"] == 1 and res["to"] == new.marker
    assert scalar(pg_mem, "SELECT value FROM db_meta WHERE key = 'embedder'") == new.marker
    dims = rows(pg_mem, "SELECT DISTINCT vector_dims(v), v FROM vectors")
    assert [(d, len(v)) for d, v in dims] == [(64, 256), (64, 256)]
    assert pg_mem.recall("reembed me").items[0].text == "reembed me on PostgreSQL"


def test_report_entry_points_that_need_no_sleep_steps(pg_mem: Memory) -> None:
    pg_mem.remember("a memory for the heatmap")
    pg_mem.recall("heatmap memory")
    heat = pg_mem.attention_heatmap()
    assert heat["window_days"] == 30
    assert pg_mem.topics() == [] and pg_mem.entity_graph() == {"nodes": [], "edges": []}
