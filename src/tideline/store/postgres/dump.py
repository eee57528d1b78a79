"""Rows of a PostgreSQL store as plain values, and back: the archive's PostgreSQL side.

The shared reader and loader are in :mod:`tideline.store.dump`; this module adds what is
PostgreSQL's own: columns from the catalogue (so a column a later migration adds travels
unchanged), rows streamed through a server-side cursor in key order with text keys
compared byte-wise (``COLLATE "C"``, SQLite's order, so an archive of the same rows has
the same sha256 on both backends), rows loaded in batches through ``COPY`` (see
:class:`PostgresLoader`), and at the end the id sequences moved past the loaded ids and
the deferred foreign keys checked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from psycopg import errors as pg_errors

from tideline.errors import ArchiveInvalid
from tideline.store.dump import (
    ArchiveLoader,
    ArchiveSnapshot,
    Column,
    catalogue_columns,
    key_names,
    quote,
    taken,
    vector_differs,
)
from tideline.store.postgres.bulk import copy_index_rows, copy_vectors, deferred_indexes
from tideline.store.postgres.schema import DERIVED_TABLES
from tideline.store.postgres.session import Conn, translate
from tideline.store.rows import memory_index_text, turn_index_text

if TYPE_CHECKING:
    from tideline.models import MemoryRecord
    from tideline.store.postgres.host import PostgresHost

__all__ = ["PostgresLoader", "PostgresSnapshot", "load", "snapshot"]

_BATCH = 5_000  # archived rows gathered per COPY
_AFFINITY = {"bigint": "integer", "integer": "integer", "smallint": "integer",
             "double precision": "real", "real": "real", "text": "text", "bytea": "blob"}


def _affinity(declared: str) -> str:
    return _AFFINITY.get(declared, "blob")


def _json_default(default: str) -> str | None:
    return "[]" if default.startswith("'[]'") else "{}" if default.startswith("'{}'") else None


def _columns(c: Conn, table: str) -> list[Column]:
    rows = c.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
        "pg_get_expr(d.adbin, d.adrelid), coalesce((SELECT k.n FROM unnest(i.indkey) "
        "WITH ORDINALITY AS k(att, n) WHERE k.att = a.attnum), 0) "
        "FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid "
        "AND d.adnum = a.attnum LEFT JOIN pg_index i ON i.indrelid = a.attrelid "
        "AND i.indisprimary WHERE a.attrelid = to_regclass(?) AND a.attnum > 0 "
        "AND NOT a.attisdropped ORDER BY a.attnum", (table,)).fetchall()
    return catalogue_columns(table, rows, affinity=_affinity, json_default=_json_default)


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
        keys = self._order_keys(table, cols)
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
def snapshot(store: PostgresHost, namespace: str | None) -> Iterator[PostgresSnapshot]:
    """A REPEATABLE READ snapshot that stays consistent while every table is read.

    Raises:
        StoreError: the database failed.
    """
    with store.db.snapshot() as c:
        yield PostgresSnapshot(c, namespace)


@dataclass
class PostgresLoader(ArchiveLoader):
    """Rows into a store inside one bulk transaction (see :func:`load`), in batches.

    Rows of a table (with the same columns) are gathered and loaded ``_BATCH`` at a
    time: ``COPY`` into a temporary table without constraints, then one ``INSERT …
    SELECT … ON CONFLICT DO NOTHING RETURNING`` its keys into the table, whose
    constraints judge every row (a refused row fails the whole load); a row that was
    not inserted must be identical to the one holding its key, or the load stops with
    :class:`~tideline.errors.Conflict` (one statement checks the batch). Vectors go the
    same way in pgvector's binary form. The index rows of the new memories and turns
    are ``COPY``-ed at the end. Anything that reads the store (``meta``, ``is_new``,
    the end) loads what is gathered first.

    Attributes:
        inserted: rows inserted per table.
        skipped: rows skipped per table because an identical row was there already.
    """

    derived = DERIVED_TABLES
    nul_in_text = False
    non_finite_vectors = False
    _rows: list[Sequence[Any]] = field(default_factory=list)
    _rows_of: tuple[str, tuple[str, ...]] | None = None
    _vectors: list[tuple[str, int, np.ndarray]] = field(default_factory=list)
    _puts: list[tuple[str, int, np.ndarray]] = field(default_factory=list)

    def _columns(self, table: str) -> list[Column]:
        return _columns(self.c, table)

    def _insert(self, table: str, names: Sequence[str], values: Sequence[Any]) -> bool:
        """Insert one row (a batch of one; see :meth:`_add_row` for the batches)."""
        self._flush()
        self._rows_of, self._rows = (table, tuple(names)), [values]
        return bool(self._flush_rows())

    def _add_row(self, table: str, cols: Sequence[Column], row: Mapping[str, Any]) -> None:
        names = tuple(col.name for col in cols if col.name in row)
        if self._rows_of != (table, names):
            self._flush()
            self._rows_of = (table, names)
        self._rows.append([row[n] for n in names])
        if len(self._rows) >= _BATCH:
            self._flush_rows()

    def _add_checked_vector(self, space: str, key: int, blob: bytes, vec: np.ndarray) -> None:
        self._flush_rows()
        self._vectors.append((space, key, vec))
        if len(self._vectors) >= _BATCH:
            self._flush_vectors()

    def _store_vector(self, space: str, key: int, vector: np.ndarray) -> None:
        """Gather one vector of a row this load inserted (``COPY``-ed in batches)."""
        self._puts.append((space, key, vector))
        if len(self._puts) >= _BATCH:
            self._flush_puts()

    def meta(self, key: str) -> str | None:
        """One ``db_meta`` value as this transaction sees it."""
        self._flush()
        return super().meta(key)

    def set_meta(self, key: str, value: str) -> None:
        """Write one ``db_meta`` value in this transaction."""
        self._flush()
        super().set_meta(key, value)

    def _add_meta(self, row: Mapping[str, Any]) -> None:
        self._flush()
        super()._add_meta(row)

    def is_new(self, space: str, key: int) -> bool:
        """Whether the memory or turn behind a vector key was inserted by this load."""
        self._flush_rows()
        self._flush_vectors()
        return super().is_new(space, key)

    def _flush(self) -> None:
        self._flush_rows()
        self._flush_vectors()
        self._flush_puts()

    def _flush_rows(self) -> int:
        """Load the gathered rows of one table; returns how many were inserted."""
        if self._rows_of is None or not self._rows:
            return 0
        (table, names), rows = self._rows_of, self._rows
        self._rows = []
        cols = self._columns_of(table)
        keys = key_names(cols) or [names[0]]
        listed = ", ".join(map(quote, names))
        self.c.execute("DROP TABLE IF EXISTS tl_stage")
        self.c.execute(f"CREATE TEMP TABLE tl_stage ON COMMIT DROP AS SELECT {listed} "  # noqa: S608
                       f"FROM {quote(table)} WITH NO DATA")
        with self.c.raw.cursor() as cur, cur.copy(f"COPY tl_stage ({listed}) FROM STDIN") as cp:
            for values in rows:
                cp.write_row(values)
        try:
            added = self.c.execute(
                f"INSERT INTO {quote(table)} ({listed}) SELECT {listed} FROM tl_stage "  # noqa: S608
                f"ON CONFLICT DO NOTHING RETURNING {', '.join(map(quote, keys))}").fetchall()
        except (pg_errors.CheckViolation, pg_errors.NotNullViolation,
                pg_errors.NumericValueOutOfRange, pg_errors.InvalidTextRepresentation) as exc:
            raise ArchiveInvalid(f"{table}: {str(exc).strip()}") from None
        if len(added) < len(rows):
            same = " AND ".join(f"x.{quote(n)} IS NOT DISTINCT FROM s.{quote(n)}" for n in names)
            held = self.c.execute(
                f"SELECT {', '.join(f's.{quote(k)}' for k in keys)} FROM tl_stage s "  # noqa: S608
                f"WHERE NOT EXISTS (SELECT 1 FROM {quote(table)} x WHERE {same}) "
                "LIMIT 1").fetchone()
            if held is not None and table not in self.keep_existing:
                raise taken(table, ", ".join(f"{k}={v!r}"
                                             for k, v in zip(keys, held, strict=True)))
            self._count_skipped(table, len(rows) - len(added))
        if added:
            has_id = "id" in keys
            self._count_inserted(table, [r[keys.index("id")] if has_id else None
                                         for r in added])
        return len(added)

    def _flush_vectors(self) -> None:
        """Load the gathered archived vectors (identical ones already there are skipped)."""
        if not self._vectors:
            return
        rows, self._vectors = self._vectors, []
        self.c.execute("DROP TABLE IF EXISTS tl_stage_vectors")
        self.c.execute("CREATE TEMP TABLE tl_stage_vectors (space text NOT NULL, "
                       "key bigint NOT NULL, v vector NOT NULL) ON COMMIT DROP")
        copy_vectors(self.c, rows, table="tl_stage_vectors")
        added = self.c.execute(
            "INSERT INTO vectors (space, key, v) SELECT space, key, v FROM tl_stage_vectors "
            "ON CONFLICT (space, key) DO NOTHING RETURNING space, key").fetchall()
        if len(added) < len(rows):
            differs = self.c.execute(
                "SELECT s.space, s.key FROM tl_stage_vectors s WHERE NOT EXISTS (SELECT 1 "
                "FROM vectors x WHERE x.space = s.space AND x.key = s.key AND x.v = s.v) "
                "LIMIT 1").fetchone()
            if differs is not None and "vectors" not in self.keep_existing:
                raise vector_differs(differs[0], differs[1])
            self._count_skipped("vectors", len(rows) - len(added))
        self._count_vectors([(str(s), int(k)) for s, k in added])

    def _flush_puts(self) -> None:
        if self._puts:
            rows, self._puts = self._puts, []
            copy_vectors(self.c, rows)

    def _namespaces(self, table: str, ids: Sequence[int]) -> dict[int, str]:
        """The namespace of each loaded row (an archive of a store holds several)."""
        return {int(i): str(ns) for i, ns in self.c.execute(
            f"SELECT id, namespace FROM {table} WHERE id = ANY(?)",  # noqa: S608
            ([int(i) for i in ids],)).fetchall()}

    def _index_memories(self, recs: Sequence[MemoryRecord]) -> None:
        names = self._namespaces("memories", [rec.id for rec in recs])
        copy_index_rows(self.c, "memories_lex",
                        [(rec.id, names[rec.id], memory_index_text(rec)) for rec in recs])

    def _index_turns(self, turns: Sequence[tuple[int, str, str]]) -> None:
        names = self._namespaces("turns", [tid for tid, _, _ in turns])
        copy_index_rows(self.c, "turns_lex", [(tid, names[tid], turn_index_text(speaker, text))
                                              for tid, speaker, text in turns])

    def finish(self) -> None:
        """Load what is gathered, index the new rows, check every reference.

        Raises:
            ArchiveInvalid: a row refers to a memory, turn or cluster that is not there.
        """
        self._flush()
        super().finish()

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
def load(store: PostgresHost, dim: int,
         expected: Mapping[str, int] | None = None) -> Iterator[PostgresLoader]:
    """One bulk transaction for a whole archive: all of it or nothing.

    Foreign keys are checked at the end (:meth:`PostgresLoader.finish`), so rows may
    arrive in any order. ``expected`` (rows per archived table) lets the load build the
    derived indexes of tables holding fewer rows than it brings once at the end (see
    :mod:`tideline.store.postgres.bulk`).

    Raises:
        StoreError: the database failed (the transaction is rolled back).
    """
    counts = dict(expected or {})
    derived = {"vectors": counts.get("vectors", 0), "memories_lex": counts.get("memories", 0),
               "turns_lex": counts.get("turns", 0)}
    with store.db.bulk() as c, deferred_indexes(c, derived):
        c.execute("SET CONSTRAINTS ALL DEFERRED")
        loader = PostgresLoader(store, c, dim)
        try:
            yield loader
            loader.finish()
        except psycopg.errors.ForeignKeyViolation as exc:
            raise ArchiveInvalid(f"rows refer to missing rows: {str(exc).strip()}") from None
