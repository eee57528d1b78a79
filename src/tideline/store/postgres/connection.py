"""The PostgreSQL connection: a psycopg 3 pool, short write transactions, migrations.

The shared views write their SQL once, with SQLite's ``?`` placeholders
(:mod:`tideline.store.dialect`); :class:`Conn` translates it for psycopg with
:func:`translate` (``?`` → ``%s`` outside quoted text, every ``%`` doubled) and caches
the translation.

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

Every statement a :class:`Conn` sends is counted (:attr:`Database.statements`): the
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
import functools
import random
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format

from tideline.errors import (
    BackendUnavailable,
    InputTooLarge,
    InvalidInput,
    PrimaryUnavailable,
    SchemaTooNew,
    StoreBusy,
    StoreError,
    StoreFull,
    TidelineError,
)
from tideline.store.dialect import POSTGRES, PostgresDialect
from tideline.store.meta import MetaRows
from tideline.store.postgres import redact_url
from tideline.store.postgres.batch import Batch, Columns, parse, plan
from tideline.store.postgres.replicas import Endpoint, is_lost, lsn_int
from tideline.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from tideline.store.routing import standby_ok

__all__ = ["Conn", "Cursor", "Database", "VectorParam", "advisory_key", "from_psycopg",
           "translate"]

# Lock classes for pg_advisory_lock(int, int): the first key says what is locked.
LOCK_MIGRATE = 7101
LOCK_KEY = 7102
LOCK_SESSION = 7103
LOCK_SLEEP = 7104
LOCK_DDL = 7105
LOCK_ANALYZE = 7106

#: Each session's ``gin_pending_list_limit`` in kB (see the module's docstring).
GIN_PENDING_KB = 128

_BUSY_STATES = frozenset({"40001", "40P01", "55P03", "57014"})


def advisory_key(*parts: str) -> int:
    """A signed 32-bit key for ``pg_advisory_lock(class, key)`` from text parts."""
    digest = zlib.crc32("\x1f".join(parts).encode("utf-8", "surrogatepass"))
    return digest - (1 << 32) if digest >= (1 << 31) else digest


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """SQLite-style SQL for psycopg: ``?`` → ``%s`` outside quotes, every ``%`` → ``%%``.

    Single-quoted literals (``''`` inside) and double-quoted identifiers are copied as
    they are, except that a ``%`` in them is doubled too (psycopg reads the whole text).
    """
    out: list[str] = []
    quote = ""
    for ch in sql:
        if ch == "%":
            out.append("%%")
            continue
        if quote:
            out.append(ch)
            if ch == quote:
                quote = ""  # a doubled quote closes and reopens: same result
            continue
        if ch in ("'", '"'):
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        else:
            out.append(ch)
    return "".join(out)


# A statement that reads the vectors table: its results come in binary (see above).
_FROM_VECTORS = re.compile(r"^\s*(SELECT|WITH)\b.*\bFROM vectors\b", re.IGNORECASE | re.DOTALL)


@functools.lru_cache(maxsize=4096)
def _binary(sql: str) -> bool:
    return _FROM_VECTORS.search(sql) is not None


# A statement that changes rows (some writes run as one autocommit statement on a read
# connection): after it, the session notes the WAL position (read your own writes).
_CHANGES = re.compile(r"\b(INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|MERGE\s+INTO)\b",
                      re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def _changes(sql: str) -> bool:
    return _CHANGES.search(sql) is not None


class _VectorBinaryLoader(Loader):
    """pgvector's binary form (int16 dimensions, int16 zero, big-endian float32s) →
    little-endian float32 bytes."""

    format = Format.BINARY

    def load(self, data: Any) -> bytes:
        import numpy as np  # here: a hook that reads no vector must not load numpy

        return np.frombuffer(data, dtype=">f4", offset=4).astype("<f4").tobytes()


class _VectorTextLoader(Loader):
    """pgvector's text form (``[0.1,0.2]``, every float32 printed exactly) → the bytes."""

    def load(self, data: Any) -> bytes:
        import numpy as np

        return np.array(bytes(data)[1:-1].split(b","), dtype="<f4").tobytes()


class VectorParam:
    """A query vector sent as a parameter in pgvector's binary form (its text form cost
    ~0.4 ms of client CPU per 384-d vector to print, and the server as long to parse).

    Args:
        vector: the float32 vector.
    """

    __slots__ = ("data",)

    def __init__(self, vector: Any) -> None:
        import numpy as np

        arr = np.ascontiguousarray(vector, dtype=np.float32).ravel()
        # int16 dimensions, int16 unused, big-endian float32s: the same floats exactly.
        self.data = (len(arr).to_bytes(2, "big") + b"\x00\x00"
                     + arr.astype(">f4").tobytes())


class _VectorBinaryDumper(Dumper):
    """:class:`VectorParam` → its bytes, binary, type left to the server (oid 0): every
    statement casts the parameter (``?::vector(384)``), so the server reads it as a
    vector, whatever oid the type has in this database."""

    format = Format.BINARY
    oid = 0

    def dump(self, obj: Any) -> bytes:
        return bytes(obj.data)


psycopg.adapters.register_dumper(VectorParam, _VectorBinaryDumper)  # only our own type


def _params(params: Sequence[Any] | None) -> tuple[Any, ...]:
    # Booleans are INTEGER 0/1 on both backends; SQLite takes True for 1, PostgreSQL not.
    if not params:
        return ()
    return tuple(int(p) if isinstance(p, bool) else p for p in params)


def from_psycopg(exc: psycopg.Error) -> TidelineError:
    """Map a psycopg error to the typed tree by its SQLSTATE.

    Args:
        exc: the error raised by psycopg.

    Returns:
        The matching :class:`TidelineError`, with ``exc`` as its cause.
    """
    state = getattr(exc, "sqlstate", None) or ""
    text = " ".join(str(exc).split())  # one line: the CLI prints errors as one line
    mapped: TidelineError
    if state in _BUSY_STATES:
        mapped = StoreBusy(f"the database is busy ({state}): {text}")
    elif state in ("53100", "53200", "53400"):
        mapped = StoreFull(f"the database server is out of space or memory ({state}): {text}")
    elif state == "54000" or "too long" in text or "exceeds the maximum" in text:
        mapped = InputTooLarge(text)
    elif "NUL" in text and isinstance(exc, psycopg.DataError | pg_errors.UntranslatableCharacter
                                      | pg_errors.CharacterNotInRepertoire):
        mapped = InvalidInput("text must not contain NUL characters")
    elif state.startswith("22"):
        mapped = InvalidInput(f"the database refused a value ({state}): {text}")
    elif isinstance(exc, psycopg.OperationalError) and not state:
        mapped = BackendUnavailable(f"cannot reach the PostgreSQL server: {text}")
    else:
        mapped = StoreError(f"postgresql {state or 'error'}: {text}")
    mapped.__cause__ = exc
    return mapped


class Cursor(Protocol):
    """What a statement gives back (a psycopg cursor)."""

    @property
    def rowcount(self) -> int:
        """Rows the statement changed."""

    def fetchone(self) -> Any:
        """The next row, or None."""

    def fetchall(self) -> list[Any]:
        """Every row left."""

    def __iter__(self) -> Iterator[Any]:
        """The rows, one at a time."""


class _Cursor:
    """A psycopg cursor, plus SQLite's ``lastrowid`` for callers not yet on ``RETURNING``."""

    __slots__ = ("_conn", "_cur", "_pipeline")

    def __init__(self, cur: psycopg.Cursor[Any], conn: psycopg.Connection[Any],
                 pipeline: psycopg.Pipeline | None = None) -> None:
        self._cur = cur
        self._conn = conn
        self._pipeline = pipeline

    @property
    def rowcount(self) -> int:
        if self._pipeline is not None:  # fetch* flush the pipeline themselves; rowcount not
            self._pipeline.sync()
        return self._cur.rowcount

    @property
    def lastrowid(self) -> int | None:
        """The id the last INSERT of this session drew from an identity (``lastval()``)."""
        try:
            with self._conn.transaction():  # a savepoint: a failure leaves the txn usable
                row = self._conn.execute("SELECT lastval()").fetchone()
        except psycopg.Error:
            return None
        return None if row is None else int(row[0])

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cur)


class _Many:
    """The cursors of one ``executemany`` run as a few set-based statements."""

    __slots__ = ("_curs", "_pipeline")

    def __init__(self, curs: list[psycopg.Cursor[Any]], pipeline: psycopg.Pipeline | None) -> None:
        self._curs = curs
        self._pipeline = pipeline

    @property
    def rowcount(self) -> int:
        if self._pipeline is not None:
            self._pipeline.sync()
        return sum(max(c.rowcount, 0) for c in self._curs)

    def fetchone(self) -> Any:
        return self._curs[-1].fetchone()

    def fetchall(self) -> list[Any]:
        return self._curs[-1].fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._curs[-1])


@functools.lru_cache(maxsize=512)
def _batch(sql: str) -> Batch | None:
    return parse(sql)


_CATALOG = (
    "SELECT a.attname, format_type(a.atttypid, a.atttypmod), "
    "coalesce(a.attnum = ANY(i.indkey), false) FROM pg_attribute a "
    "LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary "
    "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped "
    "ORDER BY a.attnum")


class _Counter:
    """Statements sent through :class:`Conn` (thread-safe: recall reads from two threads)."""

    __slots__ = ("_lock", "value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.value += n


class Conn:
    """A psycopg connection that takes the shared views' ``?`` SQL.

    Attributes:
        raw: the psycopg connection (inside the store package only).
        dialect: :data:`~tideline.store.dialect.POSTGRES`.
        writing: whether this is a write transaction (reads of rows a write will
            change lock them; see :meth:`PostgresStore.get_memories`).
    """

    dialect: PostgresDialect = POSTGRES

    def __init__(self, raw: psycopg.Connection[Any], *, writing: bool,
                 columns: dict[str, Columns | None] | None = None,
                 counter: _Counter | None = None) -> None:
        self.raw = raw
        self.counter = counter or _Counter()
        self.writing = writing
        self._columns: dict[str, Columns | None] = {} if columns is None else columns
        self.in_transaction = False
        self.pipeline: psycopg.Pipeline | None = None
        #: Whether a standby answers this connection's reads (never written to).
        self.standby = False
        #: Called with the connection after each transaction of :meth:`pipelined`
        #: commits (the store notes the WAL position: read your own writes).
        self.on_commit: Callable[[psycopg.Connection[Any]], None] | None = None
        #: Whether a statement that changes rows was sent (see ``_CHANGES``).
        self.changed = False

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A transaction for statements that need one (``SET LOCAL``), pipelined; inside
        a transaction already, nothing new."""
        if self.in_transaction:
            return contextlib.nullcontext()
        return self.pipelined()

    @contextlib.contextmanager
    def pipelined(self) -> Iterator[None]:
        """One transaction in pipeline mode (see the module's docstring)."""
        self.counter.add(2)  # BEGIN and COMMIT (or ROLLBACK)
        try:
            with self._pipelined():
                yield
            if self.on_commit is not None:
                self.on_commit(self.raw)
        except BaseException:
            # A statement nobody read failed: it comes out at the final Sync, which
            # leaves the transaction failed (COMMIT was skipped). End it here, not in
            # the pool.
            if self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                with contextlib.suppress(psycopg.Error):
                    self.raw.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def _pipelined(self) -> Iterator[None]:
        with self.raw.pipeline() as pipe:
            self.pipeline = pipe
            try:
                # Not psycopg's transaction(): in a pipeline it waits for BEGIN's result,
                # and again before COMMIT. Here BEGIN goes with the first statements and
                # COMMIT with the Sync that ends the pipeline: two round trips fewer.
                self.raw.execute("BEGIN")
                try:
                    yield
                    # Sent, and its result read, at the Sync below. A statement nobody
                    # read that failed may have answered already: then COMMIT raises it.
                    self.raw.execute("COMMIT")
                except BaseException:
                    # After an error the server skips what was queued until a Sync, and
                    # the transaction is then failed: Sync first, then ROLLBACK (so the
                    # pipeline ends clean, and psycopg has no error to log at its exit).
                    with contextlib.suppress(psycopg.Error):
                        pipe.sync()
                    self.raw.execute("ROLLBACK")
                    raise
            finally:
                self.pipeline = None

    def execute(self, sql: str, params: Sequence[Any] | None = ()) -> Cursor:
        """Run one statement with ``?`` placeholders; returns the cursor.

        Raises:
            psycopg.Error: mapped to typed errors by the enclosing ``read``/``write``.
        """
        self.counter.add(1)
        if not self.changed and _changes(sql):
            self.changed = True
        return _Cursor(self.raw.execute(translate(sql), _params(params), binary=_binary(sql)),
                       self.raw, self.pipeline)

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> Cursor:
        """Run one statement once per parameter row: as a few statements over many rows
        each where :mod:`~tideline.store.postgres.batch` can rewrite it (same result),
        else row by row."""
        rows = [_params(p) for p in seq]
        if not self.changed and _changes(sql):
            self.changed = True
        batch = _batch(sql) if len(rows) > 1 else None
        if batch is not None:
            columns = self.columns(batch.table)
            statements = plan(batch, columns, rows) if columns is not None else None
            if statements is not None:
                self.counter.add(len(statements))
                return _Many([self.raw.execute(q, p) for q, p in statements], self.pipeline)
        self.counter.add(1)  # psycopg pipelines the rows: one batch, one wait
        cur = self.raw.cursor()
        cur.executemany(translate(sql), rows)
        return _Cursor(cur, self.raw, self.pipeline)

    def columns(self, table: str) -> Columns | None:
        """A table's column types and primary key from the catalog (cached per database;
        None for no such table)."""
        if table not in self._columns:
            rows = self.raw.execute(_CATALOG, (table,)).fetchall()
            self._columns[table] = ({str(n): str(t) for n, t, _ in rows},
                                    tuple(str(n) for n, _, k in rows if k)) if rows else None
        return self._columns[table]

    def lock(self, kind: int, *parts: str) -> None:
        """Take a transaction-scoped advisory lock (released at commit or rollback)."""
        self.counter.add(1)
        self.raw.execute("SELECT pg_advisory_xact_lock(%s, %s)", (kind, advisory_key(*parts)))


class Database(MetaRows):
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
        self._counter = _Counter()
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
        # A read-only verb's reads go to a standby when the reads are routed. Any read
        # does while no primary answers (probed first, at most every PROBE_EVERY s: the
        # reads of a write are what notices the new primary); a write sent through it
        # is refused by the standby and raised as PrimaryUnavailable.
        if not writing and self.route is not None and (
                (self.route.routed and standby_ok())
                or (self.primary.down and not self.primary.probe())):
            got = self._acquire_standby()
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

    def _failed(self, exc: psycopg.Error, raw: psycopg.Connection[Any],
                endpoint: Endpoint) -> TidelineError:
        """The typed error for a failed session; a lost server marks its endpoint down."""
        mapped: TidelineError
        refused = getattr(exc, "sqlstate", None) == "25006"
        if refused and endpoint.read_only:
            # A write reached the read route while no primary answers: the primary's job.
            mapped = PrimaryUnavailable("no PostgreSQL primary answers right now (a "
                                        "failover?); nothing was written: retry shortly")
            mapped.__cause__ = exc
            return mapped
        if is_lost(exc, raw):
            endpoint.mark_down()
            where = "standby" if endpoint.read_only else "primary"
            mapped = PrimaryUnavailable(
                f"the connection to the PostgreSQL {where} was lost or refused the "
                f"statement ({' '.join(str(exc).split())[:300]}); retry shortly")
            mapped.__cause__ = exc
            return mapped
        return from_psycopg(exc)

    def _note_commit(self, raw: psycopg.Connection[Any]) -> None:
        """After a commit, the primary's WAL position, so that this process's next routed
        read waits for a standby to replay past it (read your own writes)."""
        route = self.route
        if route is None or not route.routed or standby_ok():
            # No routed reads; or the write of a read-only verb (a recall's journal),
            # which no later read needs to see.
            return
        row = raw.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
        if row is not None:
            route.wrote(lsn_int(str(row[0])))

    def _acquire_standby(self) -> tuple[psycopg_pool.ConnectionPool[Any],
                                        psycopg.Connection[Any]] | None:
        route = self.route
        assert route is not None  # noqa: S101 - only called with a route
        got = route.acquire()
        if got is None:
            return None
        pool, raw = got
        try:
            fresh = route.caught_up(raw)
        except psycopg.Error as exc:
            pool.putconn(raw)
            if is_lost(exc, raw):
                route.endpoint.mark_down()
                return None
            raise from_psycopg(exc) from exc
        if not fresh and not self.primary.down:
            pool.putconn(raw)
            route.count("primary_fallbacks")
            return None
        self._register_vector(raw)
        return pool, raw

    @contextlib.contextmanager
    def _standby_session(self, pool: psycopg_pool.ConnectionPool[Any],
                         raw: psycopg.Connection[Any]) -> Iterator[Conn]:
        route = self.route
        assert route is not None  # noqa: S101 - only called with a route
        route.count("standby_reads")
        conn = Conn(raw, writing=False, columns=self._columns, counter=self._counter)
        conn.standby = True
        self._local.conn = conn
        try:
            yield conn
        except psycopg.Error as exc:
            raise self._failed(exc, raw, route.endpoint) from exc
        finally:
            self._local.conn = None
            pool.putconn(raw)

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
        oid = self._vector_oid
        if oid is not None and raw.adapters.get_loader(oid, Format.BINARY) is None:
            raw.adapters.register_loader(oid, _VectorBinaryLoader)
            raw.adapters.register_loader(oid, _VectorTextLoader)

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
