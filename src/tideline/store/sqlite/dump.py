"""Rows of a SQLite store as plain values, and back: the archive's SQLite side.

The shared reader and loader are in :mod:`tideline.store.dump`; this module adds what is
SQLite's own. Columns come from ``PRAGMA table_info`` so a column a later migration adds
travels without a change here; rows without a key come in ``rowid`` order; a refused
insert is told from a taken key by its IntegrityError, and foreign keys are checked once
at the end (``PRAGMA foreign_key_check``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tideline.errors import ArchiveInvalid
from tideline.store.dump import (
    IMPORT_META_PREFIX,
    ArchiveLoader,
    ArchiveSnapshot,
    Column,
    catalogue_columns,
)
from tideline.store.sql import placeholders

if TYPE_CHECKING:
    from tideline.models import MemoryRecord
    from tideline.store.sqlite.host import SQLiteHost

__all__ = ["DERIVED_TABLES", "IMPORT_META_PREFIX", "SQLiteLoader", "SQLiteSnapshot", "load",
           "snapshot"]

# Rebuilt from the rows (or internal to one process), never archived.
DERIVED_TABLES = frozenset({"vector_log", "vector_counts", "vectors_staging", "sqlite_sequence",
                            "memories_fts", "memories_tri", "turns_fts", "turns_tri"})


def _affinity(declared: str) -> str:
    d = declared.upper()
    if "INT" in d:
        return "integer"
    if "CHAR" in d or "CLOB" in d or "TEXT" in d:
        return "text"
    if "BLOB" in d or not d:
        return "blob"
    return "real"


def _json_default(default: str) -> str | None:
    return default.strip("'") if default in ("'[]'", "'{}'") else None


def _columns(c: sqlite3.Connection, table: str) -> list[Column]:
    rows = c.execute("SELECT name, type, \"notnull\", dflt_value, pk "
                     "FROM pragma_table_info(?)", (table,)).fetchall()
    return catalogue_columns(table, rows, affinity=_affinity, json_default=_json_default)


def tables_in(store: SQLiteHost) -> set[str]:
    """Every ordinary table of the database except derived ones and FTS shadow tables."""
    with store.db.read() as c:
        rows = c.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    names = {str(r[0]) for r in rows}
    fts = {n for n in DERIVED_TABLES if n.endswith(("_fts", "_tri"))}
    return {n for n in names if n not in DERIVED_TABLES
            and not any(n.startswith(f + "_") for f in fts)}


class SQLiteSnapshot(ArchiveSnapshot):
    """One consistent read snapshot of a store (or of one namespace of it).

    Args:
        c: the connection, inside an open read transaction.
        namespace: only this namespace, or None for the whole store.
    """

    derived = DERIVED_TABLES

    def _columns(self, table: str) -> list[Column]:
        return _columns(self._c, table)

    def _order(self, table: str, cols: Sequence[Column]) -> str:
        return ", ".join(self._order_keys(table, cols)) or "rowid"

    def _stream(self, table: str, sql: str, args: Sequence[Any]) -> Iterator[Sequence[Any]]:
        yield from self._c.execute(sql, args)


@contextlib.contextmanager
def snapshot(store: SQLiteHost, namespace: str | None) -> Iterator[SQLiteSnapshot]:
    """A read snapshot that stays consistent while every table is read (WAL keeps writers going).

    Raises:
        StoreError: the database failed.
    """
    with store.db.read() as c:
        c.execute("BEGIN")
        try:
            yield SQLiteSnapshot(c, namespace)
        finally:
            with contextlib.suppress(sqlite3.Error):
                c.execute("ROLLBACK")


@dataclass
class SQLiteLoader(ArchiveLoader):
    """Rows into a store inside one write transaction (see :func:`load`).

    Attributes:
        inserted: rows inserted per table.
        skipped: rows skipped per table because an identical row was there already.
    """

    derived = DERIVED_TABLES

    def _columns(self, table: str) -> list[Column]:
        return _columns(self.c, table)

    def _insert(self, table: str, names: Sequence[str], values: Sequence[Any]) -> bool:
        try:
            self.c.execute(f"INSERT INTO {table}({', '.join(names)}) "
                           f"VALUES ({placeholders(len(names))})", values)
        except sqlite3.IntegrityError as exc:
            text = str(exc)
            if "UNIQUE" not in text and "PRIMARY KEY" not in text:
                raise ArchiveInvalid(f"{table}: {text}") from None
            return False
        return True

    def _store_vector(self, space: str, key: int, vector: np.ndarray) -> None:
        self.store._put_vector(self.c, space, key, vector)

    def _index_memories(self, recs: Sequence[MemoryRecord]) -> None:
        for rec in recs:
            self.store._index_memory(self.c, rec.id, rec)

    def _index_turns(self, turns: Sequence[tuple[int, str, str]]) -> None:
        for tid, speaker, text in turns:
            self.store._index_turn(self.c, tid, speaker, text)

    def _finish_load(self) -> None:
        bad = self.c.execute("PRAGMA foreign_key_check").fetchall()
        if bad:
            table, rowid, parent = bad[0][0], bad[0][1], bad[0][2]
            raise ArchiveInvalid(f"{len(bad)} row(s) refer to missing rows, e.g. {table} "
                                 f"row {rowid} → {parent}")


@contextlib.contextmanager
def load(store: SQLiteHost, dim: int) -> Iterator[SQLiteLoader]:
    """One ``BEGIN IMMEDIATE`` transaction for a whole archive: all of it or nothing.

    Foreign keys are checked at the end (:meth:`SQLiteLoader.finish`), so rows may
    arrive in any order.

    Raises:
        StoreError: the database failed (the transaction is rolled back).
    """
    with store.db.write() as c:
        c.execute("PRAGMA defer_foreign_keys = ON")
        loader = SQLiteLoader(store, c, dim)
        yield loader
        loader.finish()
