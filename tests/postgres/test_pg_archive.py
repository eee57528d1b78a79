"""Issue 11, "Export, import, migrate": SQLite → PostgreSQL → SQLite is exact."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.archive.helpers import open_store, populate, rows_by_table
from tests.backend import rows
from tests.conftest import hashing
from tests.postgres.conftest import pg_database

from tideline import Memory
from tideline.archive.exchange import archive_digest
from tideline.archive.format import TABLES
from tideline.errors import InvalidInput
from tideline.store.postgres.dump import _columns

QUERIES = ("E4521 loader", "what does Ana drink", "deploy key", "茶", "csv column upstream",
           "nothing like this was ever said")


def _recalls(mem: Memory) -> list[list[tuple[str, int, float, str]]]:
    out = []
    for q in QUERIES:
        items = mem.recall(q, scope="atlas", log=False).items
        out.append([(i.type, i.id, i.confidence, i.text) for i in items])
    return out


def test_sqlite_to_postgres_to_sqlite_is_exact(tmp_path: Path, pg_url: str) -> None:
    with open_store(tmp_path / "A") as source:
        populate(source)
        with open_store(tmp_path / "A", namespace="work") as other:
            other.remember("a memory of the work namespace")
        before = rows_by_table(source)
        digest = archive_digest(source.store)
        recalled = _recalls(source)
        there = source.migrate(pg_url)
        assert there["verified"] is True and there["to"].startswith("postgresql://")
    assert {t for t in TABLES if before[t]} >= {"memories", "turns", "edges", "vectors",
                                                "emb_clusters", "sleep_state", "events"}
    with Memory.open(tmp_path / "pg-local", database=pg_url, embedder=hashing(),
                     project="atlas") as pg:
        assert rows_by_table(pg) == before
        assert archive_digest(pg.store) == digest
        assert _recalls(pg) == recalled
        assert pg.doctor()["ok"]
        # Ids drawn after the load follow the loaded ones (the sequences moved on).
        new = pg.remember("written on PostgreSQL after the migration")
        assert new.id > max(r["id"] for r in before["memories"])
        pg.forget(new.id)
        back = pg.migrate(tmp_path / "B")
        assert back["verified"] is True
    with open_store(tmp_path / "B", project="atlas") as copy:
        after = rows_by_table(copy)
        for table in TABLES:
            if table == "events":  # the forget above is journaled, the rest is the same
                assert after[table][:len(before[table])] == before[table]
                continue
            assert after[table] == before[table], table
        assert _recalls(copy) == recalled
    with open_store(tmp_path / "B", namespace="work") as work:
        assert work.recall("work namespace", log=False).items


def test_every_archived_table_exists_on_postgres_with_the_sqlite_columns(
        tmp_path: Path, pg_mem: Memory) -> None:
    with open_store(tmp_path / "A") as lite:
        for table in TABLES:
            names = [r[0] for r in rows(lite, "SELECT name FROM pragma_table_info(?)",
                                        (table,))]
            with pg_database(pg_mem).read() as c:
                pg_names = [col.name for col in _columns(c, table)]
            if table == "vectors":
                names.remove("id")
            assert pg_names == names, table


def test_import_twice_is_a_no_op_and_taken_ids_are_remapped(tmp_path: Path, pg_url: str) -> None:
    with open_store(tmp_path / "A") as source:
        populate(source)
        source.export(tmp_path / "a.jsonl")
    with Memory.open(tmp_path / "l", database=pg_url, embedder=hashing(),
                     project="atlas") as pg:
        first = pg.import_archive(tmp_path / "a.jsonl")
        assert first["already_imported"] is False and first["inserted"]["memories"] == 4
        again = pg.import_archive(tmp_path / "a.jsonl")
        assert again["already_imported"] is True
        own = tmp_path / "own.jsonl"
        pg.export(own)
        assert pg.import_archive(own)["inserted"] == {}
        with open_store(tmp_path / "A") as again_source, \
                pytest.raises(InvalidInput, match="already holds"):
            again_source.migrate(pg_url)
    with open_store(tmp_path / "C") as other:
        other.remember("a different first memory")
        other.export(tmp_path / "c.jsonl")
    with Memory.open(tmp_path / "l", database=pg_url, embedder=hashing()) as pg:
        count = pg.introspect()["memories"]
        # Issue 28 §2.4: a taken id is no conflict any more; the row gets a new one.
        merged = pg.import_archive(tmp_path / "c.jsonl")
        assert merged["merged"] is True and merged["ids"]["memories"]["1"] > count
        assert pg.introspect()["memories"] == count + 1
