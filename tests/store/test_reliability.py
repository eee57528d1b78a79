"""Reliability on real stores: concurrent processes, migrations, re-embedding, doctor.

The two tests of processes sharing a store run on each backend (``backends`` marker); the
rest are SQLite-only: migrations of old SQLite files, the FTS5 tables, the local index file.
"""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import pytest
from tests.backend import Backend, migrated_from, run_all, scalar, schema_version, sqlite_file
from tests.conftest import hashing

from tideline import EmbedderMismatch, Memory, StoreCorrupt
from tideline.embed import HashingEmbedder
from tideline.store.sqlite import schema
from tideline.store.sqlite.connection import Database


def _writer(home: str, worker: int, count: int, out: mp.Queue) -> None:
    errors: list[str] = []
    acked = 0
    with Memory.open(home, embedder=hashing()) as mem:
        for i in range(count):
            try:
                mem.remember(f"worker {worker} fact {i} about topic {i * 7919 % 101}",
                             scope=f"p{worker % 2}", idempotency_key=f"w{worker}-{i}")
                if i % 5 == 0:
                    mem.add_turns([{"session": f"w{worker}", "role": "user",
                                    "text": f"turn {i}", "id": f"w{worker}-t{i}"}])
                if i % 3 == 0:
                    mem.recall(f"fact {i}", scope=f"p{worker % 2}")
                acked += 1
            except Exception as exc:  # recorded, asserted on below
                errors.append(f"{type(exc).__name__}: {exc}")
    out.put((worker, acked, errors))


@pytest.mark.backends
def test_concurrent_processes_lose_nothing(tmp_path: Path, backend: Backend) -> None:
    home = tmp_path / "s"
    Memory.open(home, embedder=hashing()).close()  # TIDELINE_DATABASE_URL names the backend
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    workers, count = 4, 40
    procs = [ctx.Process(target=_writer, args=(str(home), w, count, out)) for w in range(workers)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    errors = [e for _, _, errs in results for e in errs]
    acked = sum(a for _, a, _ in results)
    with Memory.open(home, embedder=hashing()) as mem:
        keys = scalar(mem, "SELECT count(*) FROM write_keys")
        doctor = mem.doctor()
        turns = mem.introspect()["turns"]
    print(json.dumps({"acked": acked, "keys": keys, "errors": len(errors), "turns": turns}))
    assert errors == []
    assert acked == workers * count == keys
    assert turns == workers * (count // 5)
    assert doctor["ok"], doctor


@pytest.mark.backends
def test_index_stays_current_across_processes(tmp_path: Path, backend: Backend) -> None:
    home = tmp_path / "s"
    reader = Memory.open(home, embedder=hashing())
    backend.check(reader)
    assert reader.recall("heron migration", abstain=False).items == ()
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    p = ctx.Process(target=_writer, args=(str(home), 7, 3, out))
    p.start()
    out.get(timeout=120)
    p.join()
    with Memory.open(home, embedder=hashing()) as w:
        target = w.remember("the heron migration starts in March").id
    items = reader.recall("heron migration").items
    assert items and items[0].id == target
    reader.close()


def test_migration_from_v1_with_safety_copy(tmp_path: Path) -> None:
    home = tmp_path / "s"
    home.mkdir()
    with sqlite_file(home / "tideline.db") as conn:
        schema.MIGRATIONS[0](conn)
        conn.execute("INSERT INTO db_meta VALUES ('schema_version', '1')")
        conn.execute("INSERT INTO db_meta VALUES ('embedder', ?)", (hashing().marker,))
    with Memory.open(home, embedder=hashing()) as mem:
        assert migrated_from(mem) == 1
        assert schema_version(mem) == schema.SCHEMA_VERSION
        mem.remember("works after migration")
        mem.recall("migration")
    backups = list((home / "backups").glob("pre-migrate-v1-*.db"))
    assert len(backups) == 1
    with sqlite_file(backups[0]) as old:
        version = old.execute("SELECT value FROM db_meta WHERE key='schema_version'").fetchone()
    assert version == ("1",)


def test_newer_schema_refused(tmp_path: Path) -> None:
    Memory.open(tmp_path / "s", embedder=hashing()).close()
    db = Database(tmp_path / "s")
    db.set_meta("schema_version", "999")
    db.close()
    from tideline import SchemaTooNew

    with pytest.raises(SchemaTooNew):
        Memory.open(tmp_path / "s", embedder=hashing())


def test_not_a_database(tmp_path: Path) -> None:
    home = tmp_path / "s"
    home.mkdir()
    (home / "tideline.db").write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreCorrupt):
        Memory.open(home, embedder=hashing())


def test_embedder_mismatch_and_reembed(tmp_path: Path) -> None:
    home = tmp_path / "s"
    with Memory.open(home, embedder=hashing()) as mem:
        a = mem.remember("the lighthouse keeper logs the weather at dawn").id
        mem.add_turns([{"session": "s", "role": "user", "text": "dawn weather log", "id": "1"}])
    other = HashingEmbedder(dim=256)
    with pytest.raises(EmbedderMismatch) as err:
        Memory.open(home, embedder=other)
    assert "hashing" in str(err.value) and "256" in str(err.value)
    with Memory.open(home) as mem:  # opens with the stored embedder
        result = mem.reembed(other)
        assert result["memories"] == 1 and result["turns"] == 1
        assert mem.recall("lighthouse keeper weather").items[0].id == a
    with Memory.open(home, embedder=other) as mem:
        assert mem.embedder.dim == 256
        assert mem.doctor()["ok"]


def test_doctor_repairs_derived_data(mem: Memory) -> None:
    a = mem.remember("otters hold hands while sleeping").id
    mem.add_turns([{"session": "s", "role": "user", "text": "otters are cute", "id": "1"}])
    run_all(mem, [("DELETE FROM memories_fts", ()),
                  ("DELETE FROM vectors WHERE space LIKE 'm:%'", ())])
    report = mem.doctor()
    assert not report["ok"] and "parity:vectors" in report["problems"]
    fixed = mem.doctor(repair=True)
    assert fixed["ok"], fixed
    assert mem.recall("otters sleeping").items[0].id == a


def test_index_file_corruption_is_rebuilt(store_dir: Path) -> None:
    with Memory.open(store_dir, embedder=hashing()) as mem:
        a = mem.remember("the comet returns every 76 years").id
    for f in (store_dir / "index").glob("*"):
        if f.is_file():
            f.write_bytes(b"garbage")
    with Memory.open(store_dir, embedder=hashing()) as mem:
        assert mem.recall("comet returns").items[0].id == a
