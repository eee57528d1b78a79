"""Rows of a SQLite store as plain values, and back: what the portable archive reads and writes.

The archive format (:mod:`tideline.archive`) names the tables and encodes values; this
module is the SQLite side of it. Columns come from ``PRAGMA table_info`` so a column a
later migration adds travels without a change here. Derived data is not dumped: the
full-text tables and the vector change log are rebuilt from the rows while loading.

Loading keeps every id as it is in the archive. A row whose key is already taken by an
identical row is skipped (so a store's own archive loads into it as a no-op); a key taken
by a different row is a :class:`~tideline.errors.Conflict`, and the whole load rolls back.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tideline.errors import ArchiveInvalid, Conflict
from tideline.store.rows import (
    MEMORY_COLUMNS,
    embedding_jobs,
    memory_from_row,
    turn_index_text,
)
from tideline.store.sqlite import fts
from tideline.store.view import placeholders

if TYPE_CHECKING:
    from tideline.store.sqlite.store import SQLiteStore

__all__ = ["DERIVED_TABLES", "SQLiteLoader", "SQLiteSnapshot", "archive_embedding_jobs",
           "load", "snapshot"]

# Rebuilt from the rows (or internal to one process), never archived.
DERIVED_TABLES = frozenset({"vector_log", "vectors_staging", "sqlite_sequence",
                            "memories_fts", "memories_tri", "turns_fts", "turns_tri"})
# db_meta keys that belong to the store itself, not to what it remembers.
_OWN_META = ("schema_version", "embedder")
IMPORT_META_PREFIX = "archive:"
# Columns that are a storage detail of this backend (the vector row's own rowid).
_INTERNAL_COLUMNS: dict[str, tuple[str, ...]] = {"vectors": ("id",)}
_ORDER: dict[str, str] = {"vectors": "space, key"}
_IN_NS_MEMORIES = "IN (SELECT id FROM memories WHERE namespace = :ns)"
# How a table without a namespace column belongs to one namespace.
_NS_FILTERS: dict[str, str] = {
    "edges": f"src {_IN_NS_MEMORIES}",
    "memory_keywords": f"memory_id {_IN_NS_MEMORIES}",
    "vectors": "(substr(space, 1, length(:mp)) = :mp OR substr(space, 1, length(:tp)) = :tp)",
    "topic_members": "cluster_id IN (SELECT id FROM topic_clusters WHERE namespace = :ns)",
    "emb_members": "cluster_id IN (SELECT id FROM emb_clusters WHERE namespace = :ns)",
    "emb_adjacency": "a IN (SELECT id FROM emb_clusters WHERE namespace = :ns)",
    "db_meta": "1",
}
_META_FILTER = f"substr(key, 1, {len(IMPORT_META_PREFIX)}) != '{IMPORT_META_PREFIX}'"


@dataclass(frozen=True)
class _Column:
    name: str
    affinity: str
    notnull: bool
    json_default: str | None
    pk: int


def _affinity(declared: str) -> str:
    d = declared.upper()
    if "INT" in d:
        return "integer"
    if "CHAR" in d or "CLOB" in d or "TEXT" in d:
        return "text"
    if "BLOB" in d or not d:
        return "blob"
    return "real"


def _columns(c: sqlite3.Connection, table: str) -> list[_Column]:
    rows = c.execute("SELECT name, type, \"notnull\", dflt_value, pk "
                     "FROM pragma_table_info(?)", (table,)).fetchall()
    skip = _INTERNAL_COLUMNS.get(table, ())
    out = []
    for name, declared, notnull, default, pk in rows:
        if name in skip:
            continue
        json_default = default.strip("'") if default in ("'[]'", "'{}'") else None
        out.append(_Column(str(name), _affinity(str(declared or "")), bool(notnull),
                           json_default, int(pk)))
    return out


def tables_in(store: SQLiteStore) -> set[str]:
    """Every ordinary table of the database except derived ones and FTS shadow tables."""
    with store.db.read() as c:
        rows = c.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    names = {str(r[0]) for r in rows}
    fts = {n for n in DERIVED_TABLES if n.endswith(("_fts", "_tri"))}
    return {n for n in names if n not in DERIVED_TABLES
            and not any(n.startswith(f + "_") for f in fts)}


class SQLiteSnapshot:
    """One consistent read snapshot of a store (or of one namespace of it).

    Args:
        c: the connection, inside an open read transaction.
        namespace: only this namespace, or None for the whole store.
    """

    def __init__(self, c: sqlite3.Connection, namespace: str | None) -> None:
        self._c = c
        self.namespace = namespace

    def meta(self, key: str) -> str | None:
        """One ``db_meta`` value as the snapshot sees it."""
        row = self._c.execute("SELECT value FROM db_meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _where(self, table: str) -> tuple[str, dict[str, Any]]:
        cols = {col.name for col in _columns(self._c, table)}
        if not cols:
            raise ArchiveInvalid(f"the store has no table {table!r}")
        clauses = [_META_FILTER] if table == "db_meta" else []
        args: dict[str, Any] = {}
        if self.namespace is not None:
            ns = self.namespace
            args = {"ns": ns, "mp": f"m:{ns}:", "tp": f"t:{ns}:"}
            if "namespace" in cols:
                clauses.append("namespace = :ns")
            elif table in _NS_FILTERS:
                clauses.append(_NS_FILTERS[table])
            else:
                raise ArchiveInvalid(f"table {table!r} cannot be split by namespace")
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args

    def count(self, table: str) -> int:
        """How many rows of ``table`` the snapshot holds."""
        where, args = self._where(table)
        return int(self._c.execute(f"SELECT count(*) FROM {table}{where}",
                                   args).fetchone()[0])

    def rows(self, table: str) -> Iterator[dict[str, Any]]:
        """The rows of ``table`` in key order, as ``{column: value}`` (blobs as bytes)."""
        cols = _columns(self._c, table)
        names = [col.name for col in cols]
        keys = [col.name for col in sorted(cols, key=lambda x: x.pk) if col.pk]
        order = _ORDER.get(table) or (", ".join(keys) if keys else "rowid")
        where, args = self._where(table)
        cur = self._c.execute(
            f"SELECT {', '.join(names)} FROM {table}{where} ORDER BY {order}",
            args)
        for row in cur:
            yield dict(zip(names, row, strict=True))


@contextlib.contextmanager
def snapshot(store: SQLiteStore, namespace: str | None) -> Iterator[SQLiteSnapshot]:
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
class SQLiteLoader:
    """Rows into a store inside one write transaction (see :func:`load`).

    Attributes:
        inserted: rows inserted per table.
        skipped: rows skipped per table because an identical row was there already.
    """

    store: SQLiteStore
    c: sqlite3.Connection
    dim: int
    inserted: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    _cols: dict[str, list[_Column]] = field(default_factory=dict)
    _new_memories: dict[int, None] = field(default_factory=dict)
    _new_turns: dict[int, None] = field(default_factory=dict)
    _new_vectors: set[tuple[str, int]] = field(default_factory=set)

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
            cols = self._cols[table] = _columns(self.c, table)
            if not cols or table in DERIVED_TABLES:
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
            self.c.execute(
                f"INSERT INTO {table}({', '.join(names)}) "
                f"VALUES ({placeholders(len(names))})", [row[n] for n in names])
        except sqlite3.IntegrityError as exc:
            self._collision(table, cols, row, exc)
            return
        self.inserted[table] = self.inserted.get(table, 0) + 1
        if table == "memories":
            self._new_memories[int(row["id"])] = None
        elif table == "turns":
            self._new_turns[int(row["id"])] = None

    def _collision(self, table: str, cols: Sequence[_Column], row: Mapping[str, Any],
                   exc: sqlite3.IntegrityError) -> None:
        text = str(exc)
        if "UNIQUE" not in text and "PRIMARY KEY" not in text:
            raise ArchiveInvalid(f"{table}: {text}") from None
        keys = [col.name for col in cols if col.pk] or [cols[0].name]
        where = " AND ".join(f"{k} = ?" for k in keys)
        names = [col.name for col in cols]
        found = self.c.execute(
            f"SELECT {', '.join(names)} FROM {table} WHERE {where}",
            [row.get(k) for k in keys]).fetchone()
        wanted = tuple(row.get(n) for n in names)
        if found is None or tuple(found) != wanted:
            ident = ", ".join(f"{k}={row.get(k)!r}" for k in keys)
            raise Conflict(f"{table} row ({ident}) is taken by a different row in this store; "
                           "ids are kept as they are in the archive, so import it into a "
                           "fresh store (or one that does not hold these ids)") from None
        self.skipped[table] = self.skipped.get(table, 0) + 1

    def _add_meta(self, row: Mapping[str, Any]) -> None:
        key, value = row.get("key"), row.get("value")
        if not isinstance(key, str) or not isinstance(value, str):
            raise ArchiveInvalid("db_meta rows need a text key and value")
        if key in _OWN_META or key.startswith(IMPORT_META_PREFIX):
            return
        cur = self.c.execute("INSERT OR IGNORE INTO db_meta(key, value) VALUES (?, ?)",
                             (key, value))
        counter = self.inserted if cur.rowcount else self.skipped
        counter["db_meta"] = counter.get("db_meta", 0) + 1

    def _add_vector(self, row: Mapping[str, Any]) -> None:
        space, key, blob = row.get("space"), row.get("key"), row.get("v")
        if not isinstance(space, str) or not isinstance(key, int) or not isinstance(blob, bytes):
            raise ArchiveInvalid("vectors rows need space, key and v")
        if len(blob) != 4 * self.dim:
            raise ArchiveInvalid(f"vector {space}/{key} has {len(blob) // 4} dimensions; "
                                 f"the embedder has {self.dim}")
        found = self.c.execute("SELECT v FROM vectors WHERE space = ? AND key = ?",
                               (space, key)).fetchone()
        if found is not None:
            if bytes(found[0]) != blob:
                raise Conflict(f"vector {space}/{key} differs from the archive's")
            self.skipped["vectors"] = self.skipped.get("vectors", 0) + 1
            return
        self.put_vector(space, key, np.frombuffer(blob, dtype=np.float32))

    def put_vector(self, space: str, key: int, vector: np.ndarray) -> None:
        """Store one vector (and its change-log entry) in this transaction."""
        self.store._put_vector(self.c, space, key, vector)
        self._new_vectors.add((space, key))
        self.inserted["vectors"] = self.inserted.get("vectors", 0) + 1

    def is_new(self, space: str, key: int) -> bool:
        """Whether the memory or turn behind a vector key was inserted by this load."""
        ids = self._new_memories if space.startswith("m:") else self._new_turns
        return key in ids and (space, key) not in self._new_vectors

    def finish(self) -> None:
        """Index the new rows for full-text search and check every reference.

        Raises:
            ArchiveInvalid: a row refers to a memory, turn or cluster that is not there.
        """
        new_memories, new_turns = list(self._new_memories), list(self._new_turns)
        for start in range(0, len(new_memories), 900):
            chunk = new_memories[start:start + 900]
            for r in self.c.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories "
                    f"WHERE id IN ({placeholders(len(chunk))})", chunk).fetchall():
                rec = memory_from_row(r)
                self.store._index_memory(self.c, rec.id, rec)
        for start in range(0, len(new_turns), 900):
            chunk = new_turns[start:start + 900]
            for tid, speaker, text in self.c.execute(
                    f"SELECT id, speaker, text FROM turns "
                    f"WHERE id IN ({placeholders(len(chunk))})", chunk).fetchall():
                body = turn_index_text(speaker, text)
                self.c.execute("INSERT INTO turns_fts(rowid, body) VALUES (?, ?)",
                               (tid, fts.index_text(body)))
                self.c.execute("INSERT INTO turns_tri(rowid, body) VALUES (?, ?)", (tid, body))
        bad = self.c.execute("PRAGMA foreign_key_check").fetchall()
        if bad:
            table, rowid, parent = bad[0][0], bad[0][1], bad[0][2]
            raise ArchiveInvalid(f"{len(bad)} row(s) refer to missing rows, e.g. {table} "
                                 f"row {rowid} → {parent}")


def _check_value(table: str, col: _Column, value: Any) -> None:
    ok = {"integer": isinstance(value, int),
          "real": isinstance(value, int | float),
          "text": isinstance(value, str),
          "blob": isinstance(value, bytes)}[col.affinity]
    if not ok or isinstance(value, bool):
        raise ArchiveInvalid(f"{table}.{col.name} must be {col.affinity}, "
                             f"got {type(value).__name__}")
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise ArchiveInvalid(f"{table}.{col.name} is out of range")
    if col.json_default is not None:
        try:
            parsed = json.loads(value)
        except ValueError:
            raise ArchiveInvalid(f"{table}.{col.name} must hold JSON") from None
        if not isinstance(parsed, list if col.json_default == "[]" else dict):
            raise ArchiveInvalid(f"{table}.{col.name} must hold a JSON "
                                 f"{'list' if col.json_default == '[]' else 'object'}")


@contextlib.contextmanager
def load(store: SQLiteStore, dim: int) -> Iterator[SQLiteLoader]:
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


def archive_embedding_jobs(
    memories: Iterable[Mapping[str, Any]], turns: Iterable[Mapping[str, Any]]
) -> list[tuple[str, int, str, str | None]]:
    """(space, key, text, previous turn's text) to embed for archived memory and turn rows:
    the texts a store embeds for them itself, each turn leaning on the turn before it.

    Raises:
        ArchiveInvalid: a row lacks a column the texts are made of.
    """
    names = MEMORY_COLUMNS.split(", ")
    turn_list = list(turns)
    try:
        mem_rows = [tuple(m.get(n) for n in names) + (m["namespace"],) for m in memories]
        by_place = {(t["namespace"], t["session"], t["turn_index"]): t for t in turn_list}
        turn_rows = []
        for t in turn_list:
            prev = by_place.get((t["namespace"], t["session"], t["turn_index"] - 1))
            turn_rows.append((t["id"], t["namespace"], t["scope"], t["speaker"], t["text"],
                              prev["speaker"] if prev else None,
                              prev["text"] if prev else None))
        return embedding_jobs(mem_rows, turn_rows)
    except (KeyError, TypeError, ValueError) as exc:
        raise ArchiveInvalid(f"an archived memory or turn is incomplete: {exc}") from None
