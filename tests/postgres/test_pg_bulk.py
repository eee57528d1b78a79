"""Issue 11 on PostgreSQL: each vector stored once (schema 5), and archives loaded in
batches through ``COPY`` — exact, idempotent, and all or nothing.

The 1M-memory benchmark could not run while PostgreSQL loaded ~73 memories/s (each row a
round trip and an HNSW insert, each vector stored twice and past the TOAST threshold).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.archive.helpers import open_store, populate, rewrite, rows_by_table
from tests.backend import schema_version
from tests.postgres.conftest import at_schema, pg_database

from tideline import Memory
from tideline.archive.exchange import archive_digest
from tideline.errors import ArchiveInvalid, Conflict, TidelineError
from tideline.models import MemoryRecord
from tideline.store.postgres import dump, open_postgres
from tideline.store.postgres.pgvector import vector_text
from tideline.store.postgres.schema import SCHEMA_VERSION

MARKER = "hashing:hashing-v1/3"


def _indexes(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as c:
        return [(str(n), str(d)) for n, d in c.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
            "ORDER BY indexname").fetchall()]


def test_a_schema_4_store_moves_to_one_vector_column(tmp_path: Path, pg_url: str) -> None:
    """A store of the old layout (``v bytea`` beside ``emb vector``, the HNSW index on
    ``emb``) is migrated: one ``vector`` column named ``v``, read back as the same bytes,
    its index following it, a row that lacked its ``vector`` filled from the bytes."""
    vecs = [np.array([0.6, 0.8, 0.0], dtype=np.float32),
            np.array([0.0, 0.28, 0.96], dtype=np.float32),
            np.array([1 / 3, 2 / 3, 2 / 3], dtype=np.float32)]
    with at_schema(pg_url, 4, MARKER) as c:
        c.execute("CREATE INDEX vectors_hnsw_3 ON vectors USING hnsw ((emb::vector(3)) "
                  "vector_cosine_ops) WHERE vector_dims(emb) = 3")
        for key, vec in enumerate(vecs[:2], start=1):
            c.execute("INSERT INTO vectors(space, key, v, emb) VALUES (?, ?, ?, ?::vector)",
                      ("m:default:global", key, vec.tobytes(), vector_text(vec)))
        c.execute("INSERT INTO vectors(space, key, v) VALUES (?, ?, ?)",
                  ("m:default:global", 3, vecs[2].tobytes()))
    store = open_postgres(pg_url, tmp_path / "h", "default", MARKER)
    try:
        assert schema_version(store) == SCHEMA_VERSION
        with psycopg.connect(pg_url) as raw:
            cols = raw.execute("SELECT attname, format_type(atttypid, atttypmod), attnotnull "
                               "FROM pg_attribute WHERE attrelid = 'vectors'::regclass AND "
                               "attnum > 0 AND NOT attisdropped ORDER BY attnum").fetchall()
        assert cols == [("id", "bigint", True), ("space", "text", True),
                        ("key", "bigint", True), ("v", "vector", True)]
        assert dict(_indexes(pg_url))["vectors_hnsw_3"].endswith(
            "USING hnsw (((v)::vector(3)) vector_cosine_ops) WHERE (vector_dims(v) = 3)")
        got = store._vectors_of([("m:default:global", k) for k in (1, 2, 3)], 3)
        assert {k: v.tobytes() for k, v in got.items()} == {
            k: v.tobytes() for k, v in zip((1, 2, 3), vecs, strict=True)}
        hits = store.vector_spaces(3, MARKER).search("m", ["global"], vecs[1], 2)
        assert max(hits, key=lambda k: hits[k]) == 2 and hits[2] == pytest.approx(1.0)
    finally:
        store.close()


def test_vectors_read_back_exactly_in_text_and_binary(pg_mem: Memory) -> None:
    """Both of pgvector's forms give the float32 bytes SQLite stores (a server-side
    cursor or a caller asking for text gets the text form)."""
    rng = np.random.default_rng(7)
    vec = rng.standard_normal(pg_mem.embedder.dim).astype(np.float32)
    vec[:3] = [np.float32(1e-38), np.float32(-3.4e38), np.float32(0.1)]
    with pg_mem.store.bulk_load() as c:
        rec = MemoryRecord(id=0, scope="global", kind="fact", gesture="exact floats",
                           weight=0.3, stability=7.0, last_access=1.0, recorded_at=1.0,
                           updated_at=1.0)
        [mid] = pg_mem.store.insert_memories(c, [rec], [vec])
    with pg_database(pg_mem).read() as c:
        binary = c.execute("SELECT v FROM vectors WHERE key = ?", (mid,)).fetchone()[0]
        text = c.raw.execute("SELECT v FROM vectors WHERE key = %s", (mid,),
                             binary=False).fetchone()[0]
    assert binary == text == vec.tobytes()


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A SQLite store with something in every table and 40 bulk-loaded memories, exported."""
    root = tmp_path_factory.mktemp("bulk-src")
    with open_store(root / "A") as mem:
        recs = [MemoryRecord(id=0, scope="atlas", kind="fact", weight=0.3, stability=7.0,
                             gesture=f"bulk fact {i} about QZ-{700 + i}", last_access=1.0e9,
                             recorded_at=1.0e9, updated_at=1.0e9) for i in range(40)]
        with mem.store.bulk_load(len(recs)) as c:
            mem.store.insert_memories(c, recs, list(mem.embedder.embed_passages(
                [r.gesture for r in recs])))
        populate(mem)
        path = root / "a.jsonl"
        mem.export(path)
        yield path, archive_digest(mem.store)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 4 rows: a load of a few dozen rows crosses many batch boundaries."""
    monkeypatch.setattr(dump, "_BATCH", 4)


def test_an_archive_loads_exactly_in_batches_and_again_as_a_no_op(
        archive: tuple[Path, str], small_batches: None, pg_url: str, tmp_path: Path) -> None:
    path, digest = archive
    before = _indexes(pg_url)
    with open_store(tmp_path / "B", database=pg_url) as dest:
        fresh = _indexes(pg_url)
        first = dest.import_archive(path)
        assert archive_digest(dest.store) == digest
        assert first["inserted"]["memories"] >= 44 and not first["skipped"]
        assert _indexes(pg_url) == fresh != before  # rebuilt from their own definitions
        assert dest.recall("QZ-713", scope="atlas", log=False).items[0].text == \
            "bulk fact 13 about QZ-713"
        # The same rows again under another archive digest: every row is skipped, none
        # conflicts, nothing changes.
        with dest.store.archive_loader(dest.embedder.dim) as loader:
            for table, rows in rows_by_table(dest).items():
                for row in rows:
                    loader.add(table, row)
            skipped = dict(loader.skipped)
        assert skipped["memories"] == first["inserted"]["memories"]
        assert skipped["vectors"] == first["inserted"]["vectors"]
        assert archive_digest(dest.store) == digest
        assert dest.import_archive(path)["already_imported"] is True


def _bad_vector(rows: list[dict[str, Any]], at: int) -> None:
    vectors = [r for r in rows if r["t"] == "vectors"]
    target = vectors[at % len(vectors)]["r"]
    vec = np.frombuffer(base64.b64decode(target["v"]["b64"]), dtype=np.float32).copy()
    vec[at % vec.size] = np.nan
    target["v"] = {"b64": base64.b64encode(vec.tobytes()).decode("ascii")}


def _memory(fn: Callable[[dict[str, Any], list[dict[str, Any]]], None],
            ) -> Callable[[list[dict[str, Any]], int], None]:
    def edit(rows: list[dict[str, Any]], at: int) -> None:
        memories = [r["r"] for r in rows if r["t"] == "memories"]
        fn(memories[at % len(memories)], memories)
    return edit


_FAULTS: dict[str, tuple[Callable[[list[dict[str, Any]], int], None], type[Exception]]] = {
    "check": (_memory(lambda r, _: r.update(importance=9)), ArchiveInvalid),
    "status": (_memory(lambda r, _: r.update(status="forgotten")), ArchiveInvalid),
    "nul": (_memory(lambda r, _: r.update(gesture="a\x00b")), ArchiveInvalid),
    "dangling": (_memory(lambda r, _: r.update(supersedes=999_999)), ArchiveInvalid),
    "nan vector": (_bad_vector, ArchiveInvalid),
}


@settings(max_examples=14, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fault=st.sampled_from(sorted(_FAULTS)), at=st.integers(0, 10_000))
def test_a_bad_row_anywhere_leaves_the_store_as_it_was(
        archive: tuple[Path, str], small_batches: None, pg_url: str,
        tmp_path_factory: pytest.TempPathFactory, fault: str, at: int) -> None:
    """Property: one bad row at any place of an archive — after many batches were already
    loaded — is a typed error, and the PostgreSQL store keeps no row of the load and all
    its indexes; the good archive then loads exactly."""
    path, digest = archive
    edit, error = _FAULTS[fault]
    bad = tmp_path_factory.mktemp("bad") / "bad.jsonl"
    bad.write_bytes(path.read_bytes())

    def apply(header: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        edit(rows, at)
        return rows

    rewrite(bad, apply)
    with open_store(tmp_path_factory.mktemp("home") / "B", database=pg_url) as dest:
        empty, indexes = archive_digest(dest.store), _indexes(pg_url)
        with pytest.raises(error) as caught:
            dest.import_archive(bad)
        assert isinstance(caught.value, TidelineError)
        assert archive_digest(dest.store) == empty
        assert _indexes(pg_url) == indexes
        with psycopg.connect(pg_url) as raw:
            assert raw.execute("SELECT (SELECT count(*) FROM memories_lex) + "
                               "(SELECT count(*) FROM turns_lex)").fetchone()[0] == 0


def test_a_row_taken_by_a_different_one_stops_the_load_in_any_batch(
        archive: tuple[Path, str], small_batches: None, pg_url: str, tmp_path: Path) -> None:
    path, digest = archive
    with open_store(tmp_path / "B", database=pg_url) as dest:
        dest.import_archive(path)
        rows = rows_by_table(dest)
        rows["memories"][-3]["gesture"] += " (edited)"
        with pytest.raises(Conflict, match="memories row"), \
                dest.store.archive_loader(dest.embedder.dim) as loader:
            for table, table_rows in rows.items():
                for row in table_rows:
                    loader.add(table, row)
        assert archive_digest(dest.store) == digest


def test_the_good_archive_loads_after_refused_ones(
        archive: tuple[Path, str], small_batches: None, pg_url: str, tmp_path: Path) -> None:
    path, digest = archive
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(path.read_bytes())
    rewrite(bad, lambda h, rows: [dict(r, r=dict(r["r"], importance=0))
                                  if r["t"] == "memories" else r for r in rows])
    with open_store(tmp_path / "B", database=pg_url) as dest:
        with pytest.raises(ArchiveInvalid, match="memories"):
            dest.import_archive(bad)
        dest.import_archive(path)
        assert archive_digest(dest.store) == digest
