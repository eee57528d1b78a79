"""Issue 11, export/import/migrate: a store survives export → import → export exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.archive.helpers import body, open_store, populate, rows_by_table

from tideline.archive.exchange import archive_digest
from tideline.archive.format import EMBEDDING_TABLES, TABLES
from tideline.embed import HashingEmbedder
from tideline.errors import BackendUnavailable, EmbedderMismatch, InvalidInput
from tideline.store.sqlite.dump import tables_in

QUERIES = ("E4521 loader", "what does Ana drink", "deploy key", "茶", "csv column upstream",
           "nothing like this was ever said")


@pytest.fixture
def source(tmp_path: Path):
    mem = open_store(tmp_path / "A")
    populate(mem)
    yield mem
    mem.close()


def test_every_table_of_the_schema_is_archived(source) -> None:
    """A table a migration adds must be archived or declared derived (else it would be lost)."""
    assert tables_in(source.store) == set(TABLES)


def test_round_trip_is_exact_table_by_table(source, tmp_path: Path) -> None:
    """Store A → export → import into a fresh B → export: the archives differ only in the
    header's time, and every table matches row by row."""
    a = tmp_path / "a.jsonl"
    res = source.export(a)
    assert res["counts"]["memories"] == 4 and res["counts"]["turns"] == 3
    for table in ("edges", "vectors", "events", "profiles", "self_concept", "threads",
                  "attention_log", "emb_clusters", "sleep_state", "retention_snapshots"):
        assert res["counts"][table] > 0, table
    with open_store(tmp_path / "B") as dest:
        imp = dest.import_archive(a)
        assert imp["already_imported"] is False and imp["inserted"]["memories"] == 4
        b = tmp_path / "b.jsonl"
        dest.export(b)
        assert body(a) == body(b)
        head_a, head_b = (json.loads(p.read_text("utf-8").splitlines()[0]) for p in (a, b))
        head_a.pop("created_at")
        head_b.pop("created_at")
        assert head_a == head_b
        assert rows_by_table(source) == rows_by_table(dest)
        doctor = dest.doctor()
        assert doctor["ok"], doctor["problems"]
        for q in QUERIES:
            pa = source.recall(q, scope="atlas", log=False).to_dict()
            pb = dest.recall(q, scope="atlas", log=False).to_dict()
            keep = ("type", "id", "confidence", "source", "text")
            assert [{k: i[k] for k in keep} for i in pa["items"]] == \
                [{k: i[k] for k in keep} for i in pb["items"]], q
            assert pa["abstained"] == pb["abstained"]


def test_import_twice_is_a_no_op(source, tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    source.export(a)
    with open_store(tmp_path / "B") as dest:
        dest.import_archive(a)
        dest.recall("E4521", scope="atlas")  # the store moves on: last_access, journal
        before = archive_digest(dest.store)
        again = dest.import_archive(a)
        assert again["already_imported"] is True and again["inserted"] == {}
        assert archive_digest(dest.store) == before


def test_own_archive_loads_into_itself_as_a_no_op(source, tmp_path: Path) -> None:
    """Rows whose id is taken by an identical row are skipped, not duplicated."""
    a = tmp_path / "a.jsonl"
    source.export(a)
    before = archive_digest(source.store)
    res = source.import_archive(a)
    assert res["inserted"] == {} and res["skipped"]["memories"] == 4
    assert archive_digest(source.store) == before


def test_taken_ids_get_new_ids(source, tmp_path: Path) -> None:
    """Issue 28 §2.4: a store that is not empty takes the archive under new ids (it was a
    Conflict); the rest of the merge is in test_merge.py."""
    a = tmp_path / "a.jsonl"
    source.export(a)
    with open_store(tmp_path / "B") as dest:
        own = dest.remember("B's own first memory, unrelated to A")
        res = dest.import_archive(a)
        assert res["merged"] is True and res["inserted"]["memories"] == 4
        assert res["ids"]["memories"]["1"] != own.id
        assert dest.get(own.id).text == "B's own first memory, unrelated to A"


def test_one_namespace_only(source, tmp_path: Path) -> None:
    other = open_store(tmp_path / "A", namespace="work")
    try:
        other.remember("a memory of the work namespace", scope="atlas")
        a = tmp_path / "a.jsonl"
        source.export(a)
        w = tmp_path / "w.jsonl"
        res = other.export(w)
        assert res["namespace"] == "work" and res["counts"]["memories"] == 1
        text = w.read_text("utf-8")
        assert '"namespace":"default"' not in text and "t:default:" not in text
        # The two namespaces' archives load side by side into one fresh store.
        with open_store(tmp_path / "B") as dest:
            dest.import_archive(a)
            dest.import_archive(w)
            assert rows_by_table(dest, "work") == rows_by_table(other, "work")
            assert rows_by_table(dest, "default") == rows_by_table(source, "default")
    finally:
        other.close()


def test_embedder_mismatch_is_refused_unless_reembed(source, tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    source.export(a)
    small = HashingEmbedder(dim=128)
    with open_store(tmp_path / "B", embedder=small) as dest:
        with pytest.raises(EmbedderMismatch):
            dest.import_archive(a)
        assert dest.introspect()["memories"] == 0
        res = dest.import_archive(a, reembed=True)
        assert res["reembedded"] == 4 + 3
        assert "vectors" not in res["inserted"] or res["inserted"]["vectors"] == 7
        rows = rows_by_table(dest)
        assert all(len(v["v"]) == 4 * 128 for v in rows["vectors"])
        for t in EMBEDDING_TABLES - {"vectors"}:
            assert rows[t] == [], t
        assert dest.doctor()["ok"]
        hit = dest.recall("E4521 loader", scope="atlas", log=False)
        assert hit.items and "E4521" in hit.items[0].text


def test_archive_without_vectors_is_embedded_on_import(source, tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    res = source.export(a, vectors=False)
    assert "vectors" not in res["counts"]
    with open_store(tmp_path / "B") as dest:
        dest.import_archive(a)
        # The hashing embedder is deterministic: the vectors come out as A's own.
        assert archive_digest(dest.store) == archive_digest(source.store)


def test_migrate_copies_every_namespace_verified(source, tmp_path: Path) -> None:
    with open_store(tmp_path / "A", namespace="work") as other:
        other.remember("a memory of the work namespace")
    res = source.migrate(tmp_path / "C")
    assert res["verified"] is True
    with open_store(tmp_path / "C") as c:
        assert rows_by_table(c) == rows_by_table(source)
        assert archive_digest(c.store) == archive_digest(source.store)
    with open_store(tmp_path / "C", namespace="work") as cw:
        assert cw.recall("work namespace", log=False).items


def test_migrate_refuses_urls_itself_and_full_targets(source, tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable, match="no 'sqlite' backend"):
        source.migrate("sqlite:///x")
    for url in ("postgresql://user@127.0.0.1:1/tideline", "postgres://127.0.0.1:1/x"):
        with pytest.raises(BackendUnavailable, match="cannot reach the PostgreSQL server"):
            source.migrate(url)
    with pytest.raises(InvalidInput, match="source store itself"):
        source.migrate(tmp_path / "A")
    with open_store(tmp_path / "D") as d:
        d.remember("already here")
    with pytest.raises(InvalidInput, match="already holds"):
        source.migrate(tmp_path / "D")
    assert not list((tmp_path / "D").glob(".tideline-migrate-*"))


def test_export_while_another_process_writes_is_consistent(source, tmp_path: Path) -> None:
    """The export reads one snapshot: with a writer process running, every archive verifies
    (its rows add up to its header) and imports into a fresh store."""
    import subprocess
    import sys

    from tideline.archive.format import ArchiveReader
    from tideline.store.sqlite.schema import SCHEMA_VERSION

    root = Path(__file__).resolve().parents[2]
    code = ("import sys; from tests.archive.helpers import open_store\n"
            "m = open_store(sys.argv[1])\n"
            "for i in range(400): m.remember(f'concurrent fact {i} about host-{i}')\n"
            "m.close()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "A")], cwd=root)
    sizes = []
    try:
        for n in range(6):
            path = tmp_path / f"c{n}.jsonl"
            source.export(path)
            head = ArchiveReader(path, SCHEMA_VERSION).verify()
            sizes.append(head.counts["memories"])
    finally:
        proc.wait()
    assert proc.returncode == 0
    with open_store(tmp_path / "B") as dest:
        dest.import_archive(tmp_path / "c5.jsonl")
        assert dest.introspect()["memories"] == sizes[-1]


def test_a_column_a_later_migration_adds_travels(source, tmp_path: Path) -> None:
    """Columns are read from the schema, not listed: a new turns column (as another change
    may add) is exported and imported with no change to the archive code, and an archive
    made before the column existed still loads (the column takes its default)."""
    old = tmp_path / "old.jsonl"
    source.export(old)
    with source.store.transaction() as c:
        c.execute("ALTER TABLE turns ADD COLUMN origin TEXT NOT NULL DEFAULT ''")
        c.execute("UPDATE turns SET origin = 'import:' || message_id")
    new = tmp_path / "new.jsonl"
    source.export(new)
    assert '"origin":"import:m-1"' in new.read_text("utf-8")
    for archive, expect in ((new, "import:m-1"), (old, "")):
        with open_store(tmp_path / f"B-{archive.stem}") as dest:
            with dest.store.transaction() as c:
                c.execute("ALTER TABLE turns ADD COLUMN origin TEXT NOT NULL DEFAULT ''")
            dest.import_archive(archive)
            with dest.store.archive_snapshot(None) as snap:
                turn = next(t for t in snap.rows("turns") if t["message_id"] == "m-1")
            assert turn["origin"] == expect
