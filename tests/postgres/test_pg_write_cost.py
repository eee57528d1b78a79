"""What a gated write costs on PostgreSQL, and that the cheaper ways find the same.

The gate reads its potentiation target with its search (no statement of its own), and
a memory space that passes 1,000 vectors before autovacuum analysed ``vectors`` is
analysed by the write path, so the gate searches it through the HNSW index: the
nearest neighbour must still be the one an exact scan finds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.backend import run, scalar
from tests.conftest import hashing
from tests.postgres.conftest import pg_database, spy_statements

from tideline import Memory
from tideline.models import MemoryRecord
from tideline.store.postgres import vectors as pg_vectors

SPACE = "m:default:global"


def _load(mem: Memory, texts: list[str]) -> list[int]:
    """Memories with their vectors, inserted in one write transaction (a bulk load into
    empty tables would analyse them), the table left unanalysed."""
    recs = [MemoryRecord(id=0, scope="global", kind="fact", gesture=t, weight=0.3,
                         stability=7.0, last_access=1.0e9, recorded_at=1.0e9,
                         updated_at=1.0e9) for t in texts]
    vecs = mem.embedder.embed_passages(texts)
    with mem.store.transaction() as c:
        return [mem.store.insert_memory(c, r, v) for r, v in zip(recs, vecs, strict=True)]


def _reltuples(mem: Memory) -> float:
    return float(scalar(mem, "SELECT reltuples FROM pg_class WHERE oid = 'vectors'::regclass"))


def _texts(n: int, tag: str = "") -> list[str]:
    words = ("harbour lighthouse anchor tide river compass winter storm sail map kiln otter "
             "heron comet garden violin ticket airport bread oven").split()
    return [f"note {tag}{i}: the {words[i % 20]} and the {words[(i * 7 + 3) % 20]} "
            f"near {words[(i * 13 + 5) % 20]} {i * 31 % 977}" for i in range(n)]


def test_the_gate_finds_an_exact_duplicate_through_the_index(
        pg_mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A space of 1,200 vectors never analysed: the write analyses it, the gate searches
    the HNSW index (not the exact scan), and every exact duplicate of a stored memory
    potentiates that memory — the nearest neighbour the index gives is the exact one."""
    texts = _texts(1200)
    ids = _load(pg_mem, texts)
    assert _reltuples(pg_mem) < 0  # never analysed
    sent = spy_statements(monkeypatch)
    for i in (0, 137, 600, 1199):
        sent.clear()
        res = pg_mem.remember(texts[i])
        assert (res.decision, res.nearest, res.id) == ("potentiate", ids[i], ids[i]), i
        gate = next(s for s in sent if "FROM write_keys" in s and "FROM vectors" in s)
        assert " + 0" not in gate, "the gate scanned the space exactly"
    assert _reltuples(pg_mem) >= 1200
    spaces = pg_mem.vectors
    assert isinstance(spaces, pg_vectors.PostgresVectorSpaces)
    assert not spaces._exact(SPACE)
    with pg_database(pg_mem).read() as c:  # the planner takes the index for the gate's search
        pg_vectors.PostgresVectorSpaces._settings(c, pg_vectors.GATE_EF_SEARCH)
        from tideline.store.postgres.pgvector import VectorParam
        from tideline.store.postgres.writes import keyed_gate_sql

        vec = pg_mem.embedder.embed_passages([texts[5]])[0]
        plan = "\n".join(r[0] for r in c.execute(
            "EXPLAIN " + keyed_gate_sql(pg_mem.embedder.dim, False),
            ("default", VectorParam(vec), SPACE, 4, "default", "k", 0.0)).fetchall())
    assert "vectors_hnsw_" in plan, plan


def test_a_space_grown_by_other_hosts_is_counted_again(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Host A counted its space at 1 vector; another host then writes 1,100 memories.
    A's next write returns an id 1,100 higher, so A counts again (not after 30 s) and,
    the space past 1,000 in a table never analysed, analyses it: its gate searches the
    index from then on and still potentiates the exact duplicate."""
    monkeypatch.setattr(pg_vectors, "_RECOUNT_SECONDS", 0.0)
    with Memory.open(tmp_path / "a", database=pg_url, embedder=hashing(),
                     project="global") as a, \
            Memory.open(tmp_path / "b", database=pg_url, embedder=hashing(),
                        project="global") as b:
        a.remember("the first note of host a")
        spaces = a.vectors
        assert isinstance(spaces, pg_vectors.PostgresVectorSpaces)
        assert spaces._exact(SPACE)
        texts = _texts(1100, "b")
        ids = _load(b, texts)
        assert spaces._exact(SPACE)  # A's own writes have not moved: its count stands
        a.remember("a second note of host a, about the kiln")
        assert a.store.top_id > ids[-1]
        assert not spaces._exact(SPACE)
        assert _reltuples(a) >= 1100
        res = a.remember(texts[42])
        assert (res.decision, res.id) == ("potentiate", ids[42])


def test_the_target_read_with_the_gate_is_checked_at_the_write(pg_mem: Memory) -> None:
    """The gate's search hands the write the nearest's row and digest; if the row moved
    after that read (another host potentiated it), the write's statement sees another
    digest, the write reads the row again and merges into it as it is now."""
    first = pg_mem.remember("the heron nests on the north marsh", tags=["birds"])
    store = pg_mem.store
    real = store.remember_target

    def moved_after_reading(rec: MemoryRecord, digest: bytes) -> None:
        real(rec, digest)
        run(pg_mem, "UPDATE memories SET tags = '[\"birds\", \"marsh\"]' WHERE id = ?",
            (rec.id,))

    store.remember_target = moved_after_reading  # type: ignore[method-assign]
    res = pg_mem.remember("The heron nests on the north marsh.", tags=["dawn"])
    assert (res.decision, res.id) == ("potentiate", first.id)
    assert set(store.get_memories([first.id])[first.id].tags) == {"birds", "marsh", "dawn"}
