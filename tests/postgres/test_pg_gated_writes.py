"""A gated write on PostgreSQL in few statements (issue 11, "concurrent writes scaling
past SQLite's single writer": reproducer ``python -m tideline.bench writers --backend
sqlite,postgres --writers 1,16``)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.backend import rows, run, scalar
from tests.conftest import hashing
from tests.postgres.conftest import indexed_space, spy_statements

from tideline import Memory
from tideline.store.postgres import open_postgres
from tideline.store.postgres.pgvector import VectorParam, vector_text

MARKER = "hashing:hashing-v1/8"
_WRITES = [
    ("the lighthouse keeper logs the tide at dawn", None),
    ("The lighthouse keeper logs the tide at dawn.", None),  # the same: potentiate
    ("the lighthouse keeper logs the tide at dawn on pier 17", None),  # a detail: link
    ("the heron nests on the north marsh", "k-heron"),
    ("the heron nests on the north marsh", "k-heron"),  # the same key: a replay
    ("kiln firing schedule moves to thursdays", None),
]


def _rows(mem: Memory) -> dict[str, Any]:
    """What the writes left, without ids and times (they differ between stores)."""
    memories = rows(mem, "SELECT gesture, kind, status, reinforcements, tags, version "
                         "FROM memories ORDER BY id")
    edges = rows(mem, "SELECT a.gesture, b.gesture, e.type, e.weight FROM edges e "
                      "JOIN memories a ON a.id = e.src JOIN memories b ON b.id = e.dst "
                      "ORDER BY 1, 2")
    keys = rows(mem, "SELECT k.decision, round(k.similarity * 1000), m.gesture "
                     "FROM write_keys k JOIN memories m ON m.id = k.memory_id "
                     "ORDER BY k.created_at, m.gesture")
    events = [json.loads(d) for (d,) in rows(
        mem, "SELECT data FROM events WHERE kind = 'write' ORDER BY id")]
    vectors = scalar(mem, "SELECT count(*) FROM vectors")
    for e in events:
        e["similarity"] = round(e["similarity"], 3)
        e.pop("nearest")
    return {"memories": memories, "edges": edges,
            "keys": [(d, int(s), g) for d, s, g in keys], "events": events,
            "vectors": int(vectors)}


def test_gated_writes_leave_the_same_rows_on_both_backends(pg_url: str, tmp_path: Path) -> None:
    """The one-statement write of PostgreSQL (memory, index rows, vector, link edge, key,
    journal) leaves what SQLite's row-by-row write leaves, decision for decision."""
    outcomes: dict[str, list[tuple[str, bool]]] = {}
    left: dict[str, dict[str, Any]] = {}
    for name, database in (("sqlite", None), ("postgres", pg_url)):
        with Memory.open(tmp_path / name, database=database, embedder=hashing(),
                         project="global") as mem:
            outcomes[name] = [(r.decision, r.replayed) for r in
                              (mem.remember(text, idempotency_key=key) for text, key in _WRITES)]
            left[name] = _rows(mem)
    assert outcomes["postgres"] == outcomes["sqlite"] == [
        ("new", False), ("potentiate", False), ("link", False), ("new", False),
        ("new", True), ("new", False)]
    assert left["postgres"] == left["sqlite"]
    assert left["postgres"]["edges"] and left["postgres"]["vectors"] == 4


def test_a_gated_write_sends_its_rows_in_one_statement(pg_mem: Memory,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that links (close to its neighbour, but with a detail the neighbour
    lacks): the gate's search with the key read (and the neighbours' status, and the
    nearest's row with its digest, whose text the gate compares), then one statement
    outside a transaction that takes the key's lock, claims the key and writes every
    row — no target to lock, since the gate read the neighbour's text before the write
    (issue 28) — 2 statements, no BEGIN or COMMIT (3 before, the target read on its own;
    7 before that: BEGIN, the key's lock and re-read, the neighbour's lock, the rows
    and COMMIT after the search; 15 before that: one per row, a second read of the
    neighbours' records and a read of the pending-vector flag after commit)."""
    pg_mem.remember("the lighthouse keeper logs the tide at dawn")
    pg_mem.remember("the heron nests on the north marsh")
    sent = spy_statements(monkeypatch)
    before = pg_mem.store.statements_sent()
    res = pg_mem.remember("the lighthouse keeper logs the tide at dawn on pier 17")
    assert res.decision == "link"
    assert pg_mem.store.statements_sent() - before == len(sent) == 2
    assert "FROM write_keys" in sent[0] and "FROM vectors" in sent[0]
    assert "sha256(textsend(x::text))" in sent[0]
    assert "pg_advisory_xact_lock" in sent[1] and "FOR NO KEY UPDATE" not in sent[1]
    inserts = [s for s in sent if "INSERT INTO" in s]
    assert len(inserts) == 1
    for table in ("memories", "memories_lex", "vectors", "edges", "write_keys", "events"):
        assert f"INSERT INTO {table}(" in inserts[0], table
    assert not any(s.startswith("SELECT value FROM db_meta") for s in sent)


def test_vectors_sent_in_binary_read_back_exactly(pg_mem: Memory) -> None:
    """pgvector's binary input form carries every float32 as it is: extremes, subnormals
    and signed zeros."""
    rng = np.random.default_rng(3)
    vec = rng.standard_normal(pg_mem.embedder.dim).astype(np.float32)
    vec[:4] = [np.float32(1e-45), np.float32(-3.4e38), np.float32(-0.0), np.float32(7e4)]
    run(pg_mem, "INSERT INTO vectors(space, key, v) VALUES ('m:default:global', 1, ?::vector)",
        (VectorParam(vec),))
    back = scalar(pg_mem, "SELECT v FROM vectors WHERE key = 1")
    assert back == vec.tobytes()


def test_the_gates_search_through_the_index_finds_the_nearest(pg_url: str,
                                                              tmp_path: Path) -> None:
    """In a space too large for an exact scan, the gate's one statement (neighbours and
    their status) goes through the HNSW index with its own ``ef_search`` and finds the
    nearest vector an exact scan finds, with the float32 cosines; a key no memory of
    the namespace holds comes back without a status."""
    rng = np.random.default_rng(11)
    vecs = rng.standard_normal((1500, 8)).astype(np.float32)
    store = open_postgres(pg_url, tmp_path / "h", "default", MARKER)
    try:
        spaces = indexed_space(store, vecs, MARKER)
        unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
        for q in vecs[:20] + rng.normal(0, 0.05, (20, 8)).astype(np.float32):
            near = spaces.gate_neighbours("default", "global", q, 4)
            cos = unit @ (q / np.linalg.norm(q))
            assert len(near) == 4 and near[0][0] == int(np.argmax(cos)) + 1
            for key, sim, status in near:
                assert sim == pytest.approx(float(cos[key - 1]), abs=1e-5)
                assert status is None  # vectors without memories
        text = vector_text(vecs[0])
        plan = " ".join(str(r[0]) for r in rows(
            store, "EXPLAIN " + spaces._space_query(False), (text, "m:default:global", 5)))
        assert "vectors_hnsw_8" in plan
    finally:
        store.close()


def _traced_syncs(mem: Memory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                  action: Any) -> tuple[Any, int]:
    """Run ``action`` with libpq's trace on every connection it takes from the pool;
    returns its result and its round trips: the times the server answered after the
    client had sent something (in the trace, a backend line after a frontend line)."""
    from tideline.store.postgres.connection import Database

    real = Database._acquire
    traced: list[Any] = []
    out = (tmp_path / "trace").open("w")

    def acquire(self: Database) -> Any:
        raw = real(self)
        raw.pgconn.trace(out.fileno())
        traced.append(raw)
        return raw

    monkeypatch.setattr(Database, "_acquire", acquire)
    try:
        result = action()
    finally:
        for raw in traced:
            raw.pgconn.untrace()
        out.close()
        monkeypatch.setattr(Database, "_acquire", real)
    sides = [line.split("\t")[1] for line in (tmp_path / "trace").read_text().splitlines()
             if line.count("\t") >= 2]
    return result, sum(1 for a, b in itertools.pairwise(sides) if (a, b) == ("F", "B"))


def test_a_gated_write_waits_for_the_server_twice(pg_mem: Memory,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    """Counted in libpq's trace (reproducer: ``python -m tideline.bench writers --backend
    sqlite,postgres --writers 1,16``): a write that links waits for the server twice:
    the gate's search with the key and the target's row, and the one statement that
    locks, claims, checks and writes — a transaction of its own, so no BEGIN and no
    COMMIT. It was 3 (the target read on its own), 4 before that (the key's re-check
    with the neighbour's lock, the rows and COMMIT after the search), 9 before that."""
    pg_mem.remember("the lighthouse keeper logs the tide at dawn")
    pg_mem.remember("the heron nests on the north marsh")
    res, syncs = _traced_syncs(pg_mem, monkeypatch, tmp_path, lambda: pg_mem.remember(
        "the lighthouse keeper logs the tide at dawn on pier 17"))
    assert res.decision == "link"
    assert syncs == 2
    trace = (tmp_path / "trace").read_text()
    assert '"BEGIN"' not in trace and '"COMMIT"' not in trace


@pytest.mark.parametrize("empty", [True, False])
def test_a_replay_is_found_with_the_gates_search(pg_mem: Memory, empty: bool) -> None:
    """The key read with the gate's search finds a replay in an empty space (no
    neighbour rows) and among neighbours alike, and nothing more is sent: no
    transaction, no row written."""
    if not empty:
        pg_mem.remember("the kiln is fired on thursdays", scope="other")
    first = pg_mem.remember("the heron nests on the north marsh", idempotency_key="k1")
    if empty:  # the key's memory is the only one of its scope: move it out of the way
        run(pg_mem, "DELETE FROM vectors WHERE key = ?", (first.id,))
    before = pg_mem.store.statements_sent()
    again = pg_mem.remember("something else entirely, the otter sleeps",
                            idempotency_key="k1")
    assert again.replayed and again.id == first.id and again.decision == first.decision
    assert pg_mem.store.statements_sent() - before == 1
    assert scalar(pg_mem, "SELECT count(*) FROM memories") == (1 if empty else 2)
