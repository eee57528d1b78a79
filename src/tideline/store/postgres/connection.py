"""The PostgreSQL connection: a psycopg 3 pool, short write transactions, migrations.

Each read or write is a session on a pooled connection
(:class:`~tideline.store.postgres.session.Conn`, which translates the shared views'
``?`` placeholders for psycopg); its reads go to a standby when the verb allows it
(:mod:`tideline.store.postgres.standby`; the route and the endpoints are
:mod:`tideline.store.postgres.replicas`).

A write is one transaction at READ COMMITTED. What SQLite gets from its single writer
(a read-check-write inside one transaction sees no other writer) is given here by row
and advisory locks taken where a check must hold until commit (see
:mod:`tideline.store.postgres.store`). A transaction that waits too long for a lock,
deadlocks or fails a serialization check is rolled back and raised as
:class:`~tideline.errors.StoreBusy`; getting a connection and opening the transaction
is retried with jittered back-off first.

A write transaction runs in psycopg's pipeline mode: a statement whose result nobody
reads yet (an INSERT, an advisory lock) is sent without waiting for the server, and
the queue is flushed when a result is read (``fetchone``, ``rowcount``) or at commit.
``BEGIN`` and ``COMMIT`` are sent as statements of the pipeline, not through psycopg's
``transaction()``, which waits for ``BEGIN``'s result and syncs again before
``COMMIT``: ``BEGIN`` goes with the transaction's first statements and ``COMMIT`` with
the pipeline's closing Sync. A gated write's transaction (the idempotency key's
advisory lock and re-check with the neighbour's row lock, the rows, COMMIT) then
waits for the server 3 times (counted with libpq's trace; it was 7: BEGIN, the key,
the neighbour's lock, the rows, a Sync, COMMIT and a Sync again, one wait each);
with many writers on few cores a round trip is a wait for the client process to be
scheduled again, so this is most of the lock hold. A failed statement nobody read
comes out at that Sync, which leaves the transaction failed: it is rolled back there.
The statements still run one after the other, in order, on the server.

Every statement a session sends is counted (:attr:`Database.statements`): the
benchmarks report statements per recall from it and a test bounds them.

Each session sets ``gin_pending_list_limit`` to 128 kB. A GIN index (the word and
substring indexes) takes new rows into a pending list that every search of the index
reads in full, until an insert that pushes it past the limit (or a vacuum) merges it
into the index. At the server's default 4 MB a store written to between vacuums made
each search read up to 512 pages more: on a 100k store, 119 pending pages made every
token count of a recall's document frequencies a 3 ms scan instead of a probe.

``vectors.v`` is a pgvector ``vector``; it reads back as little-endian float32 bytes,
what SQLite's ``BLOB`` holds, so the shared views and the archive read it unchanged. A
``SELECT`` from ``vectors`` asks for binary results (pgvector's binary form is the
floats themselves, 2 µs to convert; its text form took ~600 µs per 384-d vector to
parse); every column such a statement reads (text, integers, floats, booleans, the
vector) has a binary loader. A bulk load (:meth:`Database.bulk`) is one transaction
outside pipeline mode, which ``COPY`` needs.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool

from tideline.errors import (
    BackendUnavailable,
    PrimaryUnavailable,
    SchemaTooNew,
    StoreBusy,
    StoreError,
)
from tideline.store.dialect import POSTGRES, PostgresDialect
from tideline.store.meta import MetaRows
from tideline.store.postgres.batch import Columns
from tideline.store.postgres.errors import from_psycopg
from tideline.store.postgres.lock_keys import LOCK_MIGRATE
from tideline.store.postgres.pgvector import register_loaders
from tideline.store.postgres.replicas import Endpoint
from tideline.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from tideline.store.postgres.session import Conn, Counter
from tideline.store.postgres.standby import StandbyReads
from tideline.store.postgres.urls import redact_url

__all__ = ["GIN_PENDING_KB", "Database"]

#: Each session's ``gin_pending_list_limit`` in kB (see the module's docstring).
GIN_PENDING_KB = 128


class Database(StandbyReads, MetaRows):
    """A pool of connections to one PostgreSQL database, safe to share between threads.

    The schema is created or migrated on open, under an advisory lock so that several
    hosts starting at once migrate it once.

    Args:
        url: ``postgresql://…`` (libpq connection URI).
        directory: the local state directory of this host (caches only).
        retries: extra attempts to get a connection and begin (jittered back-off).
        lock_timeout_ms: how long one statement waits for a row or advisory lock.
        pool_size: most connections this process keeps open to the server.
        read_url: where read-only verbs may read (``TIDELINE_DATABASE_READ_URL``);
            see :mod:`tideline.store.postgres.replicas` for the routing, and for a
            multi-host ``url``.
        read_wait_ms: how long a routed read waits for the standby to replay this
            process's newest write before it reads the primary.

    Raises:
        BackendUnavailable: the server cannot be reached.
        PrimaryUnavailable: no primary answers and the schema needs migrating.
        SchemaTooNew: written by a newer Tideline.
        StoreError: the database refused the schema.
    """

    dialect: PostgresDialect = POSTGRES
    backend = "postgresql"

    def __init__(self, url: str, directory: Path, *, retries: int = 6,
                 lock_timeout_ms: int = 5_000, pool_size: int = 4,
                 read_url: str | None = None, read_wait_ms: int = 500) -> None:
        from tideline.store.postgres.replicas import ReadRoute, route_urls

        self.url, route_url, routed = route_urls(url, read_url)
        self.path = redact_url(self.url)
        self.directory = directory
        self.retries = retries
        self._local = threading.local()
        self._columns: dict[str, Columns | None] = {}  # the catalog, for batch.plan
        self._vector_oid: int | None = None
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the local state directory {directory}: {exc}") \
                from exc
        self._counter = Counter()
        self._options = (f"-c lock_timeout={int(lock_timeout_ms)} "
                         "-c idle_in_transaction_session_timeout=600000 "
                         f"-c gin_pending_list_limit={GIN_PENDING_KB}")
        self._pool_size = max(1, pool_size)
        self.primary = Endpoint(self.url, self._make_pool, read_only=False, want_primary=True)
        self.route = None if route_url is None else ReadRoute(
            Endpoint(route_url, self._make_pool, read_only=True, want_primary=False),
            routed=routed, wait_ms=read_wait_ms)
        try:  # one direct try first: an unreachable server fails now, not after the pool's wait
            psycopg.connect(self.url, connect_timeout=10).close()
        except psycopg.Error as exc:
            unreachable = BackendUnavailable(
                f"cannot reach the PostgreSQL server at {self.path}: "
                f"{' '.join(str(exc).split())}")
            if self.route is None or route_url == self.url:
                raise unreachable from exc
            try:  # no primary, but a standby may answer: open read-only (a failover)
                psycopg.connect(self.route.endpoint.url, connect_timeout=10).close()
            except psycopg.Error:
                raise unreachable from exc
            self.primary.mark_down()
        try:
            if not self.primary.down:
                self.primary.open(wait=True, timeout=30.0)
            # The read route's pool opens on its first read (a CLI call may never read).
        except psycopg_pool.PoolTimeout as exc:
            self.close()
            raise BackendUnavailable(f"cannot reach the PostgreSQL server at {self.path}") \
                from exc
        except psycopg.Error as exc:
            self.close()
            raise from_psycopg(exc) from exc
        try:
            self.migrated_from = self._migrate() if not self.primary.down else None
            if self.primary.down and self.schema_version() < SCHEMA_VERSION:
                raise PrimaryUnavailable(f"the schema of {self.path} needs migrating and no "
                                         "primary answers: retry when one does")
            with self.read() as c:
                self._vector_oid = int(c.execute("SELECT 'vector'::regtype::oid").fetchone()[0])
        except BaseException:
            self.close()
            raise
        self._columns.clear()  # a migration may have changed a table

    def _make_pool(self, url: str, read_only: bool) -> psycopg_pool.ConnectionPool[Any]:
        options = self._options + (" -c default_transaction_read_only=on" if read_only else "")
        return psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=self._pool_size, open=False, timeout=30.0,
            kwargs={"options": options, "application_name": "tideline",
                    "autocommit": True},
            name=f"tideline-{id(self):x}{'-read' if read_only else ''}",
        )

    @property
    def pool(self) -> psycopg_pool.ConnectionPool[psycopg.Connection[Any]]:
        """The primary's connection pool.

        Raises:
            PrimaryUnavailable: no primary answers right now.
        """
        pool = self.primary.pool
        if pool is None:
            raise PrimaryUnavailable(f"no primary answers at {self.path}")
        return pool

    def read_only(self) -> bool:
        """Whether no primary answered this process's last attempt: reads come from a
        standby (possibly behind), and writes raise PrimaryUnavailable."""
        return self.primary.down

    @property
    def statements(self) -> int:
        """Statements this process has sent through this pool so far (all threads)."""
        return self._counter.value

    def in_use(self) -> bool:
        """Whether this thread is inside a read or write of this database (a second
        thread would not see its transaction)."""
        return self._current() is not None

    # -- transactions ---------------------------------------------------------------------

    def _current(self) -> Conn | None:
        return getattr(self._local, "conn", None)

    @contextlib.contextmanager
    def _session(self, *, writing: bool, pipelined: bool = True) -> Iterator[Conn]:
        outer = self._current()
        if outer is not None and not pipelined and outer.pipeline is not None:
            raise StoreError("a bulk load cannot run inside a pipelined write transaction")
        if outer is not None and writing and outer.standby:
            # A write inside a read a standby answers: the write is the primary's own
            # transaction (a standby never takes one).
            self._local.conn = None
            try:
                with self._session(writing=True, pipelined=pipelined) as conn:
                    yield conn
            finally:
                self._local.conn = outer
            return
        if outer is not None:
            if writing and not outer.in_transaction:
                # A write inside a plain read: from here on one transaction.
                outer.writing = outer.in_transaction = True
                self._counter.add(2)  # BEGIN and COMMIT
                try:
                    with outer.raw.transaction():
                        yield outer
                    self._note_commit(outer.raw)
                except psycopg.Error as exc:
                    raise self._failed(exc, outer.raw, self.primary) from exc
                finally:
                    outer.writing = outer.in_transaction = False
            else:
                yield outer
            return
        got = None if writing else self._standby_for_read()
        if got is not None:
            with self._standby_session(*got) as conn:
                yield conn
            return
        raw = self._acquire()
        conn = Conn(raw, writing=writing, columns=self._columns, counter=self._counter)
        conn.on_commit = self._note_commit
        self._local.conn = conn
        try:
            if writing:
                conn.in_transaction = True
                if pipelined:
                    with conn.pipelined():  # notes the commit itself (on_commit)
                        yield conn
                else:
                    with raw.transaction():
                        yield conn
                    self._note_commit(raw)
            else:  # autocommit: one snapshot per statement (as SQLite's reads), no BEGIN
                yield conn
                if conn.changed:  # a write sent as one autocommit statement
                    self._note_commit(raw)
        except psycopg.Error as exc:
            raise self._failed(exc, raw, self.primary) from exc
        finally:
            self._local.conn = None
            self._release(raw)

    @staticmethod
    def _release(raw: psycopg.Connection[Any]) -> None:
        """Give a primary connection back to the pool it came from: after a failover
        that is a pool already replaced (and closed), which closes it."""
        pool = getattr(raw, "_pool", None)  # psycopg_pool's own mark of the owner
        if pool is not None:
            pool.putconn(raw)
        else:
            raw.close()

    def _register_vector(self, raw: psycopg.Connection[Any]) -> None:
        register_loaders(raw, self._vector_oid)

    def _acquire(self) -> psycopg.Connection[Any]:
        for attempt in range(self.retries + 1):
            try:
                _pool, raw = self.primary.getconn(10.0)
                self._register_vector(raw)
                return raw
            except psycopg_pool.PoolTimeout as exc:
                if attempt == self.retries:
                    raise StoreBusy(f"no database connection free at {self.path}") from exc
                time.sleep(random.uniform(0.01, 0.05) * (2**attempt))  # noqa: S311
        raise StoreBusy("unreachable")  # pragma: no cover

    @contextlib.contextmanager
    def write(self) -> Iterator[Conn]:
        """One transaction; commits on success, rolls back on error. Nested use joins it.

        Raises:
            StoreBusy: a lock wait timed out, a deadlock or serialization failure (the
                transaction was rolled back), or no connection was free after retries.
            InvalidInput: the database refused a value (a NUL character, a bad number).
            StoreError: any other database failure.
        """
        with self._session(writing=True) as conn:
            yield conn

    @contextlib.contextmanager
    def bulk(self) -> Iterator[Conn]:
        """One write transaction outside pipeline mode, for ``COPY`` (a bulk load).

        Raises:
            StoreBusy: as :meth:`write`.
            StoreError: inside a pipelined write transaction, or a database failure.
        """
        with self._session(writing=True, pipelined=False) as conn:
            yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Conn]:
        """A connection for reads, inside a transaction (nested use joins the outer one).

        Raises:
            StoreError: a database failure, typed by SQLSTATE.
        """
        with self._session(writing=False) as conn:
            yield conn

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Conn]:
        """A read-only REPEATABLE READ transaction: one consistent view of every table
        while writers go on (the archive reads through it).

        Raises:
            StoreError: a database failure, typed by SQLSTATE.
        """
        if self._current() is not None:
            with self.read() as conn:  # inside a transaction already: its view it is
                yield conn
            return
        raw = self._acquire()
        conn = Conn(raw, writing=False, columns=self._columns, counter=self._counter)
        conn.in_transaction = True
        self._local.conn = conn
        try:
            raw.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            raw.read_only = True
            with raw.transaction():
                yield conn
        except psycopg.Error as exc:
            raise from_psycopg(exc) from exc
        finally:
            self._local.conn = None
            with contextlib.suppress(psycopg.Error):
                raw.isolation_level = None
                raw.read_only = None
            self._release(raw)

    # -- meta, migrations -----------------------------------------------------------------

    def _has_meta_table(self, c: Conn) -> bool:
        return c.execute("SELECT to_regclass('db_meta')").fetchone()[0] is not None

    def _migrate(self) -> int | None:
        current = self.schema_version()
        if current > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"{self.path} has schema {current}; this Tideline knows up to {SCHEMA_VERSION}"
            )
        if current == SCHEMA_VERSION:
            return None
        with self.write() as db:
            # Two hosts starting at once: the second waits here, then finds it done.
            db.execute("SELECT pg_advisory_xact_lock(?, 0)", (LOCK_MIGRATE,))
            db.execute("CREATE TABLE IF NOT EXISTS db_meta "
                       "(key text PRIMARY KEY, value text NOT NULL)")
            row = db.execute("SELECT value FROM db_meta WHERE key = 'schema_version'").fetchone()
            start = int(row[0]) if row else 0
            if start > SCHEMA_VERSION:
                raise SchemaTooNew(f"{self.path} has schema {start}; this Tideline knows up "
                                   f"to {SCHEMA_VERSION}")
            for number in range(start, SCHEMA_VERSION):
                MIGRATIONS[number](db)
            db.execute(
                "INSERT INTO db_meta(key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
        return current

    def backup(self, label: str, keep: int | None = None,
               max_bytes: int | None = None) -> None:
        """No file copy: a PostgreSQL store is backed up by the server (``pg_dump``,
        base backups and WAL archiving), not by each host. Returns None."""
        del label, keep, max_bytes

    def checkpoint(self) -> None:
        """Nothing to fold back: the server manages its write-ahead log."""

    def close(self) -> None:
        """Close every pooled connection."""
        self.primary.close()
        if self.route is not None:
            self.route.endpoint.close()
