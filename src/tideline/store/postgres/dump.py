"""Rows of a PostgreSQL store as plain values, and back: the archive's PostgreSQL side.

The shared reader and loader are in :mod:`tideline.store.dump`; this module adds what is
PostgreSQL's own: columns from the catalogue (so a column a later migration adds travels
unchanged), rows streamed through a server-side cursor in key order with text keys
compared byte-wise (``COLLATE "C"``, SQLite's order, so an archive of the same rows has
the same sha256 on both backends), each insert in a savepoint, and at the end the id
sequences moved past the loaded ids and the deferred foreign keys checked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pg_errors

from tideline.errors import ArchiveInvalid
from tideline.store.dump import ArchiveLoader, ArchiveSnapshot, Column, quote
from tideline.store.postgres.connection import Conn, translate
from tideline.store.postgres.schema import DERIVED_TABLES

if TYPE_CHECKING:
    from tideline.store.postgres.store import PostgresStore

__all__ = ["PostgresLoader", "PostgresSnapshot", "load", "snapshot"]

_INTERNAL_COLUMNS: dict[str, tuple[str, ...]] = {"vectors": ("id",)}
_ORDER: dict[str, tuple[str, ...]] = {"vectors": ("space", "key")}
_AFFINITY = {"bigint": "integer", "integer": "integer", "smallint": "integer",
             "double precision": "real", "real": "real", "text": "text", "bytea": "blob"}


def _columns(c: Conn, table: str) -> list[Column]:
    rows = c.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
        "pg_get_expr(d.adbin, d.adrelid), coalesce((SELECT k.n FROM unnest(i.indkey) "
        "WITH ORDINALITY AS k(att, n) WHERE k.att = a.attnum), 0) "
        "FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid "
        "AND d.adnum = a.attnum LEFT JOIN pg_index i ON i.indrelid = a.attrelid "
        "AND i.indisprimary WHERE a.attrelid = to_regclass(?) AND a.attnum > 0 "
        "AND NOT a.attisdropped ORDER BY a.attnum", (table,)).fetchall()
    skip = _INTERNAL_COLUMNS.get(table, ())
    out = []
    for name, declared, notnull, default, pk in rows:
        if name in skip:
            continue
        text = str(default or "")
        json_default = "[]" if text.startswith("'[]'") else "{}" if text.startswith("'{}'") \
            else None
        out.append(Column(str(name), _AFFINITY.get(str(declared), "blob"), bool(notnull),
                           json_default, int(pk or 0)))
    return out


class PostgresSnapshot(ArchiveSnapshot):
    """One consistent read of a store (or one namespace of it), table by table.

    Args:
        c: a connection inside a REPEATABLE READ transaction.
        namespace: only this namespace, or None for the whole store.
    """

    derived = DERIVED_TABLES

    def _columns(self, table: str) -> list[Column]:
        return _columns(self._c, table)

    def _order(self, table: str, cols: Sequence[Column]) -> str:
        keys = _ORDER.get(table) or tuple(
            col.name for col in sorted(cols, key=lambda x: x.pk) if col.pk)
        text = {col.name for col in cols if col.affinity == "text"}
        return ", ".join(f"{quote(k)} COLLATE \"C\"" if k in text else quote(k)
                         for k in keys) or "1"

    def _stream(self, table: str, sql: str, args: Sequence[Any]) -> Iterator[Sequence[Any]]:
        # Server-side: rows stream; vectors in binary (see the connection module).
        cur = self._c.raw.cursor(name=f"archive_{table}", binary=table == "vectors")
        cur.itersize = 2000
        cur.execute(translate(sql), args)
        try:
            yield from cur
        finally:
            cur.close()


@contextlib.contextmanager
def snapshot(store: PostgresStore, namespace: str | None) -> Iterator[PostgresSnapshot]:
    """A REPEATABLE READ snapshot that stays consistent while every table is read.

    Raises:
        StoreError: the database failed.
    """
    with store.db.snapshot() as c:
        yield PostgresSnapshot(c, namespace)


@dataclass
class PostgresLoader(ArchiveLoader):
    """Rows into a store inside one write transaction (see :func:`load`).

    Attributes:
        inserted: rows inserted per table.
        skipped: rows skipped per table because an identical row was there already.
    """

    derived = DERIVED_TABLES
    nul_in_text = False
    non_finite_vectors = False

    def _columns(self, table: str) -> list[Column]:
        return _columns(self.c, table)

    def _insert(self, table: str, names: Sequence[str], values: Sequence[Any]) -> bool:
        try:
            with self.c.raw.transaction():  # a savepoint: a refused row names its reason
                found = self.c.execute(
                    f"INSERT INTO {quote(table)}({', '.join(map(quote, names))}) "  # noqa: S608
                    f"VALUES ({','.join('?' * len(names))}) ON CONFLICT DO NOTHING RETURNING 1",
                    values).fetchone()
        except (pg_errors.CheckViolation, pg_errors.NotNullViolation,
                pg_errors.NumericValueOutOfRange, pg_errors.InvalidTextRepresentation) as exc:
            raise ArchiveInvalid(f"{table}: {str(exc).strip()}") from None
        return found is not None

    def _finish_load(self) -> None:
        """Move the id sequences past the loaded ids, then check the deferred references."""
        for table in sorted(self._touched):
            if "id" not in {col.name for col in self._columns_of(table)}:
                continue
            seq = self.c.execute("SELECT pg_get_serial_sequence(?, 'id')",
                                 (table,)).fetchone()[0]
            if seq is not None:
                self.c.execute(f"SELECT setval(?, (SELECT coalesce(max(id), 0) + 1 FROM "  # noqa: S608
                               f"{quote(table)}), false)", (seq,))
        try:
            with self.c.raw.transaction():
                self.c.execute("SET CONSTRAINTS ALL IMMEDIATE")
        except pg_errors.ForeignKeyViolation as exc:
            raise ArchiveInvalid(f"rows refer to missing rows: {str(exc).strip()}") from None


@contextlib.contextmanager
def load(store: PostgresStore, dim: int) -> Iterator[PostgresLoader]:
    """One transaction for a whole archive: all of it or nothing.

    Foreign keys are checked at the end (:meth:`PostgresLoader.finish`), so rows may
    arrive in any order.

    Raises:
        StoreError: the database failed (the transaction is rolled back).
    """
    with store.db.write() as c:
        c.execute("SET CONSTRAINTS ALL DEFERRED")
        loader = PostgresLoader(store, c, dim)
        try:
            yield loader
            loader.finish()
        except psycopg.errors.ForeignKeyViolation as exc:
            raise ArchiveInvalid(f"rows refer to missing rows: {str(exc).strip()}") from None
