"""Rows of a PostgreSQL store as plain values, and back: the archive's PostgreSQL side.

The same rules as SQLite's (:mod:`tideline.store.sqlite.dump`): columns come from the catalogue
(so a column a later migration adds travels unchanged), derived data is rebuilt, ids are
kept, a row whose key holds an identical row is skipped and a different one is a
:class:`~tideline.errors.Conflict` (the whole load rolls back). Rows are read in key
order with text keys compared byte-wise (``COLLATE "C"``, SQLite's order), so an archive
of the same rows has the same sha256 on both backends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from psycopg import errors as pg_errors

from tideline.errors import ArchiveInvalid, Conflict
from tideline.store.postgres.connection import Conn
from tideline.store.postgres.schema import DERIVED_TABLES
from tideline.store.rows import MEMORY_COLUMNS as _MEMORY_COLUMNS
from tideline.store.rows import memory_from_row
from tideline.store.sqlite.dump import _OWN_META, IMPORT_META_PREFIX, _check_value, _Column

if TYPE_CHECKING:
    from tideline.store.postgres.store import PostgresStore

__all__ = ["PostgresLoader", "PostgresSnapshot", "load", "snapshot"]

_INTERNAL_COLUMNS: dict[str, tuple[str, ...]] = {"vectors": ("id", "emb")}
_ORDER: dict[str, tuple[str, ...]] = {"vectors": ("space", "key")}
_IN_NS_MEMORIES = "IN (SELECT id FROM memories WHERE namespace = ?)"
# How a table without a namespace column belongs to one namespace (and its parameters).
_NS_FILTERS: dict[str, tuple[str, int]] = {
    "edges": (f"src {_IN_NS_MEMORIES}", 1),
    "memory_keywords": (f"memory_id {_IN_NS_MEMORIES}", 1),
    "topic_members": ("cluster_id IN (SELECT id FROM topic_clusters WHERE namespace = ?)", 1),
    "emb_members": ("cluster_id IN (SELECT id FROM emb_clusters WHERE namespace = ?)", 1),
    "emb_adjacency": ("a IN (SELECT id FROM emb_clusters WHERE namespace = ?)", 1),
}
_AFFINITY = {"bigint": "integer", "integer": "integer", "smallint": "integer",
             "double precision": "real", "real": "real", "text": "text", "bytea": "blob"}


def _columns(c: Conn, table: str) -> list[_Column]:
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
        out.append(_Column(str(name), _AFFINITY.get(str(declared), "blob"), bool(notnull),
                           json_default, int(pk or 0)))
    return out


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class PostgresSnapshot:
    """One consistent read of a store (or one namespace of it), table by table.

    Args:
        c: a connection inside a REPEATABLE READ transaction.
        namespace: only this namespace, or None for the whole store.
    """

    def __init__(self, c: Conn, namespace: str | None) -> None:
        self._c = c
        self.namespace = namespace
        self._cols: dict[str, list[_Column]] = {}

    def _columns_of(self, table: str) -> list[_Column]:
        if table not in self._cols:
            self._cols[table] = _columns(self._c, table)
        return self._cols[table]

    def meta(self, key: str) -> str | None:
        """One ``db_meta`` value as the snapshot sees it."""
        row = self._c.execute("SELECT value FROM db_meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _where(self, table: str) -> tuple[str, list[Any]]:
        cols = {col.name for col in self._columns_of(table)}
        if not cols or table in DERIVED_TABLES:
            raise ArchiveInvalid(f"the store has no table {table!r}")
        clauses: list[str] = []
        args: list[Any] = []
        if table == "db_meta":
            clauses.append(f"substr(key, 1, {len(IMPORT_META_PREFIX)}) != ?")
            args.append(IMPORT_META_PREFIX)
        elif self.namespace is not None:
            ns = self.namespace
            if "namespace" in cols:
                clauses.append("namespace = ?")
                args.append(ns)
            elif table == "vectors":
                clauses.append("(substr(space, 1, length(?)) = ? OR "
                               "substr(space, 1, length(?)) = ?)")
                args += [f"m:{ns}:", f"m:{ns}:", f"t:{ns}:", f"t:{ns}:"]
            elif table in _NS_FILTERS:
                sql, n = _NS_FILTERS[table]
                clauses.append(sql)
                args += [ns] * n
            else:
                raise ArchiveInvalid(f"table {table!r} cannot be split by namespace")
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args

    def count(self, table: str) -> int:
        """How many rows of ``table`` the snapshot holds."""
        where, args = self._where(table)
        return int(self._c.execute(f"SELECT count(*) FROM {_quote(table)}{where}",  # noqa: S608
                                   args).fetchone()[0])

    def rows(self, table: str) -> Iterator[dict[str, Any]]:
        """The rows of ``table`` in key order, as ``{column: value}`` (blobs as bytes)."""
        cols = self._columns_of(table)
        names = [col.name for col in cols]
        keys = _ORDER.get(table) or tuple(
            col.name for col in sorted(cols, key=lambda x: x.pk) if col.pk)
        text = {col.name for col in cols if col.affinity == "text"}
        order = ", ".join(f"{_quote(k)} COLLATE \"C\"" if k in text else _quote(k)
                          for k in keys) or "1"
        where, args = self._where(table)
        cur = self._c.raw.cursor(name=f"archive_{table}")  # server-side: rows stream
        cur.itersize = 2000
        sql = (f"SELECT {', '.join(map(_quote, names))} FROM {_quote(table)}{where} "  # noqa: S608
               f"ORDER BY {order}")
        from tideline.store.postgres.connection import translate

        cur.execute(translate(sql), args)
        try:
            for row in cur:
                yield {n: (bytes(v) if isinstance(v, memoryview) else v)
                       for n, v in zip(names, row, strict=True)}
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
class PostgresLoader:
    """Rows into a store inside one write transaction (see :func:`load`).

    Attributes:
        inserted: rows inserted per table.
        skipped: rows skipped per table because an identical row was there already.
    """

    store: PostgresStore
    c: Conn
    dim: int
    inserted: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    _cols: dict[str, list[_Column]] = field(default_factory=dict)
    _new_memories: dict[int, None] = field(default_factory=dict)
    _new_turns: dict[int, None] = field(default_factory=dict)
    _new_vectors: set[tuple[str, int]] = field(default_factory=set)
    _touched: set[str] = field(default_factory=set)

    def meta(self, key: str) -> str | None:
        """One ``db_meta`` value as this transaction sees it."""
        row = self.c.execute("SELECT value FROM db_meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Write one ``db_meta`` value in this transaction."""
        self.c.execute("INSERT INTO db_meta(key, value) VALUES (?, ?) ON CONFLICT(key) "
                       "DO UPDATE SET value = excluded.value", (key, value))

    def _columns_of(self, table: str) -> list[_Column]:
        cols = self._cols.get(table)
        if cols is None:
            if table in DERIVED_TABLES:
                raise ArchiveInvalid(f"the store has no table {table!r} to load")
            cols = self._cols[table] = _columns(self.c, table)
            if not cols:
                raise ArchiveInvalid(f"the store has no table {table!r} to load")
        return cols

    def _check(self, table: str, row: Mapping[str, Any]) -> list[_Column]:
        cols = self._columns_of(table)
        known = {col.name for col in cols}
        unknown = [k for k in row if k not in known]
        if unknown:
            raise ArchiveInvalid(f"table {table!r} has no column {unknown[0]!r}")
        for col in cols:
            value = row.get(col.name)
            if value is None:
                if col.name in row and col.notnull:
                    raise ArchiveInvalid(f"{table}.{col.name} may not be null")
                continue
            _check_value(table, col, value)
            if isinstance(value, str) and "\x00" in value:
                raise ArchiveInvalid(f"{table}.{col.name} holds a NUL character, which "
                                     "PostgreSQL text cannot store")
        return cols

    def add(self, table: str, row: Mapping[str, Any]) -> None:
        """Insert one archived row (or skip it when an identical row is there).

        Raises:
            ArchiveInvalid: unknown table or column, a value of the wrong type, a CHECK
                or NOT NULL constraint failed.
            Conflict: the row's key is taken by a different row.
        """
        cols = self._check(table, row)
        if table == "db_meta":
            self._add_meta(row)
            return
        if table == "vectors":
            self._add_vector(row)
            return
        names = [col.name for col in cols if col.name in row]
        try:
            with self.c.raw.transaction():  # a savepoint: a refused row names its reason
                found = self.c.execute(
                    f"INSERT INTO {_quote(table)}({', '.join(map(_quote, names))}) "  # noqa: S608
                    f"VALUES ({','.join('?' * len(names))}) ON CONFLICT DO NOTHING RETURNING 1",
                    [row[n] for n in names]).fetchone()
        except (pg_errors.CheckViolation, pg_errors.NotNullViolation,
                pg_errors.NumericValueOutOfRange, pg_errors.InvalidTextRepresentation) as exc:
            raise ArchiveInvalid(f"{table}: {str(exc).strip()}") from None
        if found is None:
            self._collision(table, cols, row)
            return
        self._touched.add(table)
        self.inserted[table] = self.inserted.get(table, 0) + 1
        if table == "memories":
            self._new_memories[int(row["id"])] = None
        elif table == "turns":
            self._new_turns[int(row["id"])] = None

    def _collision(self, table: str, cols: Sequence[_Column], row: Mapping[str, Any]) -> None:
        keys = [col.name for col in cols if col.pk] or [cols[0].name]
        names = [col.name for col in cols]
        where = " AND ".join(f"{_quote(k)} = ?" for k in keys)
        found = self.c.execute(
            f"SELECT {', '.join(map(_quote, names))} FROM {_quote(table)} WHERE {where}",  # noqa: S608
            [row.get(k) for k in keys]).fetchone()
        wanted = tuple(row.get(n) for n in names)
        if found is None or tuple(bytes(v) if isinstance(v, memoryview) else v
                                  for v in found) != wanted:
            ident = ", ".join(f"{k}={row.get(k)!r}" for k in keys)
            raise Conflict(f"{table} row ({ident}) is taken by a different row in this store; "
                           "ids are kept as they are in the archive, so import it into a "
                           "fresh store (or one that does not hold these ids)")
        self.skipped[table] = self.skipped.get(table, 0) + 1

    def _add_meta(self, row: Mapping[str, Any]) -> None:
        key, value = row.get("key"), row.get("value")
        if not isinstance(key, str) or not isinstance(value, str):
            raise ArchiveInvalid("db_meta rows need a text key and value")
        if key in _OWN_META or key.startswith(IMPORT_META_PREFIX):
            return
        found = self.c.execute("INSERT INTO db_meta(key, value) VALUES (?, ?) "
                               "ON CONFLICT (key) DO NOTHING RETURNING 1", (key, value)).fetchone()
        counter = self.inserted if found else self.skipped
        counter["db_meta"] = counter.get("db_meta", 0) + 1

    def _add_vector(self, row: Mapping[str, Any]) -> None:
        space, key, blob = row.get("space"), row.get("key"), row.get("v")
        if not isinstance(space, str) or not isinstance(key, int) or not isinstance(blob, bytes):
            raise ArchiveInvalid("vectors rows need space, key and v")
        if len(blob) != 4 * self.dim:
            raise ArchiveInvalid(f"vector {space}/{key} has {len(blob) // 4} dimensions; "
                                 f"the embedder has {self.dim}")
        vec = np.frombuffer(blob, dtype=np.float32)
        if not np.isfinite(vec).all():
            raise ArchiveInvalid(f"vector {space}/{key} holds a NaN or infinity")
        found = self.c.execute("SELECT v FROM vectors WHERE space = ? AND key = ?",
                               (space, key)).fetchone()
        if found is not None:
            if bytes(found[0]) != blob:
                raise Conflict(f"vector {space}/{key} differs from the archive's")
            self.skipped["vectors"] = self.skipped.get("vectors", 0) + 1
            return
        self.put_vector(space, key, vec)

    def put_vector(self, space: str, key: int, vector: np.ndarray) -> None:
        """Store one vector in this transaction."""
        self.store._put_vector(self.c, space, key, vector)
        self._new_vectors.add((space, key))
        self.inserted["vectors"] = self.inserted.get("vectors", 0) + 1

    def is_new(self, space: str, key: int) -> bool:
        """Whether the memory or turn behind a vector key was inserted by this load."""
        ids = self._new_memories if space.startswith("m:") else self._new_turns
        return key in ids and (space, key) not in self._new_vectors

    def finish(self) -> None:
        """Index the new rows, move the id sequences past them, check every reference.

        Raises:
            ArchiveInvalid: a row refers to a memory, turn or cluster that is not there.
        """
        memories, turns = list(self._new_memories), list(self._new_turns)
        for start in range(0, len(memories), 1000):
            for r in self.c.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories "  # noqa: S608
                                    "WHERE id = ANY(?)", (memories[start:start + 1000],)):
                rec = memory_from_row(r)
                self.store._index_memory(self.c, rec.id, rec)
        for start in range(0, len(turns), 1000):
            for tid, speaker, text in self.c.execute(
                    "SELECT id, speaker, text FROM turns WHERE id = ANY(?)",
                    (turns[start:start + 1000],)).fetchall():
                self.store._index_turn(self.c, int(tid), str(speaker), str(text))
        for table in sorted(self._touched):
            if "id" not in {col.name for col in self._columns_of(table)}:
                continue
            seq = self.c.execute("SELECT pg_get_serial_sequence(?, 'id')",
                                 (table,)).fetchone()[0]
            if seq is not None:
                self.c.execute(f"SELECT setval(?, (SELECT coalesce(max(id), 0) + 1 FROM "  # noqa: S608
                               f"{_quote(table)}), false)", (seq,))
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
