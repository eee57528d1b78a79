"""One session on a pooled PostgreSQL connection: statements translated, pipelined, counted.

The shared views write their SQL once, with SQLite's ``?`` placeholders
(:mod:`tideline.store.dialect`); :class:`Conn` translates it for psycopg with
:func:`translate` (``?`` → ``%s`` outside quoted text, every ``%`` doubled) and caches
the translation. How a write transaction is pipelined, and why, is told in
:mod:`tideline.store.postgres.connection`, whose :class:`Database` opens the sessions.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

import psycopg

from tideline.store.dialect import POSTGRES, PostgresDialect
from tideline.store.postgres.batch import Batch, Columns, parse, plan
from tideline.store.postgres.lock_keys import advisory_key

__all__ = ["Conn", "Counter", "Cursor", "translate"]


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


def _params(params: Sequence[Any] | None) -> tuple[Any, ...]:
    # Booleans are INTEGER 0/1 on both backends; SQLite takes True for 1, PostgreSQL not.
    if not params:
        return ()
    return tuple(int(p) if isinstance(p, bool) else p for p in params)


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


class Counter:
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
                 counter: Counter | None = None) -> None:
        self.raw = raw
        self.counter = counter or Counter()
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
