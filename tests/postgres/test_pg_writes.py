"""Concurrent writes on PostgreSQL: what a write transaction locks, and how it talks to
the server (issue 11, "concurrent writes scaling past SQLite's single writer")."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from tests.conftest import hashing
from tests.postgres.conftest import pg_database

from tideline import Memory
from tideline.config import Config
from tideline.errors import InvalidInput, StoreBusy, StoreError
from tideline.store.postgres import open_postgres
from tideline.store.postgres.connection import Database


def test_a_potentiation_lock_does_not_block_linking_to_that_memory(
        pg_mem: Memory, pg_url: str, tmp_path: Path) -> None:
    """Reproducer: ``python -m tideline.bench writers --backend postgres --writers 16``
    showed writers waiting on a tuple lock in ``INSERT INTO edges``: one writer locked a
    memory ``FOR UPDATE`` to potentiate it, and another writer's edge to that memory (a
    link) waited for it, because the edge's foreign key check takes a key-share lock.
    A memory read inside a write is now locked ``FOR NO KEY UPDATE``: the edge goes in,
    and a second potentiation of the same memory still waits (the gate's re-check holds).
    """
    store = pg_mem.store
    target = pg_mem.remember("the heron nests on the north marsh").id
    other = pg_mem.remember("the lighthouse keeper logs the tide at dawn").id
    waiter = open_postgres(pg_url, tmp_path / "b", store.namespace, store.marker,
                           retries=0, lock_timeout_ms=300)
    held, done = threading.Event(), threading.Event()

    def potentiate() -> None:
        with store.transaction() as c:
            assert target in store.get_memories([target], c)
            held.set()
            done.wait(30)

    thread = threading.Thread(target=potentiate)
    thread.start()
    try:
        assert held.wait(30)
        with waiter.transaction() as c:
            waiter.add_edge(c, other, target, "related", 0.7, time.time())
        with pytest.raises(StoreBusy), waiter.transaction() as c:
            waiter.get_memories([target], c)
    finally:
        done.set()
        thread.join()
        waiter.close()
    assert [(e.src, e.dst) for e in store.edges_of([target], ["related"])] == [(other, target)]


def test_a_write_is_pipelined_and_still_exact(tmp_path: Path, pg_url: str) -> None:
    """A write transaction sends statements without waiting for each (pipeline mode):
    ``rowcount`` is still the statement's own, and a statement that fails without its
    result ever being read still fails the whole write, which leaves nothing behind."""
    db = Database(pg_url, tmp_path / "a")
    try:
        with db.write() as c:
            assert c.pipeline is not None
            for n in range(3):
                c.execute("INSERT INTO db_meta(key, value) VALUES (?, '0')", (f"p{n}",))
            assert c.execute("UPDATE db_meta SET value = '1' WHERE key LIKE 'p%'").rowcount == 3
            assert c.execute("DELETE FROM db_meta WHERE key = 'p9'").rowcount == 0
        assert [db.get_meta(f"p{n}") for n in range(3)] == ["1", "1", "1"]
        with pytest.raises(StoreError), db.write() as c:
            c.execute("INSERT INTO db_meta(key, value) VALUES ('q', '0')")
            c.execute("INSERT INTO db_meta(key, value) VALUES ('p0', 'again')")  # taken
        assert db.get_meta("q") is None and db.get_meta("p0") == "1"
        with db.read() as c:
            assert c.pipeline is None  # reads stay one autocommit statement each
    finally:
        db.close()


def test_the_pool_size_is_a_setting(pg_url: str, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``TIDELINE_DATABASE_POOL_SIZE`` (or ``database_pool_size``) sizes each process's
    pool of connections (4 before: fixed), and a bad value is refused before anything
    opens."""
    monkeypatch.setenv("TIDELINE_DATABASE_POOL_SIZE", "12")
    assert Config.load().database_pool_size == 12
    with Memory.open(tmp_path / "a", database=pg_url, embedder=hashing(),
                     project="global") as mem:
        assert pg_database(mem).pool.max_size == 12
    cfg = Config.load(home=tmp_path / "b", database=pg_url, database_pool_size=2)
    with Memory.open(config=cfg, embedder=hashing(), project="global") as mem:
        assert pg_database(mem).pool.max_size == 2
    for bad in ("0", "many", "-3"):
        monkeypatch.setenv("TIDELINE_DATABASE_POOL_SIZE", bad)
        with pytest.raises(InvalidInput, match="(?i)pool_size"):
            Config.load()
