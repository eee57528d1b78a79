"""Rows of a store as plain values, and back: the archive's side in the store, for
every backend.

The archive format (:mod:`tideline.archive`) names the tables and encodes values; this
module reads and writes them in portable SQL. Each backend (``sqlite/dump.py``,
``postgres/dump.py``) adds what truly differs: its column catalogue, how rows are
streamed and ordered, how a refused insert is told apart from a taken key, and the
checks that end a load (foreign keys, id sequences). Derived data is not dumped: the
full-text rows and the vector change log are rebuilt from the rows while loading.

Loading keeps every id as it is in the archive. A row whose key is already taken by an
identical row is skipped (so a store's own archive loads into it as a no-op); a key taken
by a different row is a :class:`~tideline.errors.Conflict`, and the whole load rolls back.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tideline.errors import ArchiveInvalid, Conflict
from tideline.store.rows import MEMORY_COLUMNS, embedding_jobs, memory_from_row
from tideline.store.sql import placeholders

if TYPE_CHECKING:
    from tideline.models import MemoryRecord

__all__ = ["IMPORT_META_PREFIX", "ORDERED_BY", "ArchiveLoader", "ArchiveSnapshot", "Column",
           "archive_embedding_jobs", "catalogue_columns", "check_value", "key_names", "quote",
           "taken", "vector_differs"]

# db_meta keys that belong to the store itself, not to what it remembers.
OWN_META = ("schema_version", "embedder")
IMPORT_META_PREFIX = "archive:"
"""The ``db_meta`` keys an import writes (never archived: each store keeps its own)."""
_IN_NS_MEMORIES = "IN (SELECT id FROM memories WHERE namespace = ?)"
# How a table without a namespace column belongs to one namespace (one parameter: it).
_NS_FILTERS: dict[str, str] = {
    "edges": f"src {_IN_NS_MEMORIES}",
    "memory_keywords": f"memory_id {_IN_NS_MEMORIES}",
    "topic_members": "cluster_id IN (SELECT id FROM topic_clusters WHERE namespace = ?)",
    "emb_members": "cluster_id IN (SELECT id FROM emb_clusters WHERE namespace = ?)",
    "emb_adjacency": "a IN (SELECT id FROM emb_clusters WHERE namespace = ?)",
}
# Columns that are a storage detail of every backend (the vector row's own id).
_INTERNAL_COLUMNS: dict[str, tuple[str, ...]] = {"vectors": ("id",)}
#: The archive order of the tables whose key is not their primary key.
ORDERED_BY: dict[str, tuple[str, ...]] = {"vectors": ("space", "key")}


@dataclass(frozen=True)
class Column:
    """One column of a table, as the archive checks it.

    Attributes:
        name: the column name.
        affinity: ``integer``, ``real``, ``text`` or ``blob``.
        notnull: whether NULL is refused.
        json_default: ``[]`` or ``{}`` when the column holds JSON text of that shape.
        pk: the column's place in the primary key (0: not in it).
    """

    name: str
    affinity: str
    notnull: bool
    json_default: str | None
    pk: int


def catalogue_columns(
    table: str, rows: Iterable[Sequence[Any]], *, affinity: Callable[[str], str],
    json_default: Callable[[str], str | None],
) -> list[Column]:
    """The archived columns of ``table`` from a backend's catalogue rows.

    Args:
        table: the table.
        rows: (name, declared type, not null, default expression, place in the primary
            key) per column, in the table's column order.
        affinity: the backend's declared type → ``integer``, ``real``, ``text`` or ``blob``.
        json_default: the backend's default expression → ``[]``, ``{}`` or None.
    """
    skip = _INTERNAL_COLUMNS.get(table, ())
    return [Column(str(name), affinity(str(declared or "")), bool(notnull),
                   json_default(str(default or "")), int(pk or 0))
            for name, declared, notnull, default, pk in rows if name not in skip]


def key_names(cols: Sequence[Column]) -> list[str]:
    """The primary key's columns, in key order."""
    return [col.name for col in sorted(cols, key=lambda x: x.pk) if col.pk]


def quote(name: str) -> str:
    """A double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def check_value(table: str, col: Column, value: Any) -> None:
    """Refuse an archived value that does not fit its column.

    Raises:
        ArchiveInvalid: the wrong type, an integer out of range, text that is not the
            JSON the column holds.
    """
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


def _plain(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value


def _meta(c: Any, key: str) -> str | None:
    row = c.execute("SELECT value FROM db_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def taken(table: str, ident: str) -> Conflict:
    """The error of an archived row whose key (``ident``) holds a different row here."""
    return Conflict(f"{table} row ({ident}) is taken by a different row in this store; ids "
                    "are kept as they are in the archive, so import it into a fresh store "
                    "(or one that does not hold these ids)")


def vector_differs(space: str, key: int) -> Conflict:
    """The error of an archived vector whose key holds another vector here."""
    return Conflict(f"vector {space}/{key} differs from the archive's")


class ArchiveSnapshot(ABC):
    """One consistent read of a store (or of one namespace of it), table by table.

    A backend's snapshot says which tables are derived, reads its column catalogue
    (:meth:`_columns`), orders rows by :meth:`_order_keys` in its own SQL
    (:meth:`_order`) and streams them (:meth:`_stream`).

    Args:
        c: the connection, inside the backend's read transaction.
        namespace: only this namespace, or None for the whole store.
    """

    derived: frozenset[str] = frozenset()

    def __init__(self, c: Any, namespace: str | None) -> None:
        self._c = c
        self.namespace = namespace
        self._cols: dict[str, list[Column]] = {}

    @abstractmethod
    def _columns(self, table: str) -> list[Column]:
        """The archived columns of ``table`` from the backend's catalogue ([]: none)."""

    @abstractmethod
    def _order(self, table: str, cols: Sequence[Column]) -> str:
        """The ORDER BY of ``table``: its key, text compared byte-wise."""

    @abstractmethod
    def _stream(self, table: str, sql: str, args: Sequence[Any]) -> Iterator[Sequence[Any]]:
        """The rows of one SELECT, without holding them all in memory."""

    def _columns_of(self, table: str) -> list[Column]:
        if table not in self._cols:
            self._cols[table] = self._columns(table)
        return self._cols[table]

    def _order_keys(self, table: str, cols: Sequence[Column]) -> Sequence[str]:
        """The columns rows of ``table`` are archived in the order of (its key, mostly)."""
        return ORDERED_BY.get(table) or key_names(cols)

    def meta(self, key: str) -> str | None:
        """One ``db_meta`` value as the snapshot sees it."""
        return _meta(self._c, key)

    def _where(self, table: str) -> tuple[str, list[Any]]:
        cols = {col.name for col in self._columns_of(table)}
        if not cols or table in self.derived:
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
                               "substr(space, 1, length(?)) = ? OR "
                               "substr(space, 1, length(?)) = ?)")
                args += [f"m:{ns}:", f"m:{ns}:", f"t:{ns}:", f"t:{ns}:", f"s:{ns}:", f"s:{ns}:"]
            elif table in _NS_FILTERS:
                clauses.append(_NS_FILTERS[table])
                args.append(ns)
            else:
                raise ArchiveInvalid(f"table {table!r} cannot be split by namespace")
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args

    def count(self, table: str) -> int:
        """How many rows of ``table`` the snapshot holds."""
        where, args = self._where(table)
        return int(self._c.execute(f"SELECT count(*) FROM {quote(table)}{where}",
                                   args).fetchone()[0])

    def rows(self, table: str) -> Iterator[dict[str, Any]]:
        """The rows of ``table`` in key order, as ``{column: value}`` (blobs as bytes)."""
        cols = self._columns_of(table)
        names = [col.name for col in cols]
        where, args = self._where(table)
        sql = (f"SELECT {', '.join(map(quote, names))} FROM {quote(table)}{where} "
               f"ORDER BY {self._order(table, cols)}")
        for row in self._stream(table, sql, args):
            yield {n: _plain(v) for n, v in zip(names, row, strict=True)}


class _LoadTarget(Protocol):
    _chunk: int

    def _index_memory(self, c: Any, mid: int, rec: Any) -> None: ...

    def _index_turn(self, c: Any, tid: int, speaker: str, text: str) -> None: ...

    def _put_vector(self, c: Any, space: str, key: int, vector: np.ndarray) -> None: ...


@dataclass
class ArchiveLoader(ABC):
    """Rows into a store inside one write transaction (the backend's ``load``).

    A backend's loader reads its column catalogue (:meth:`_columns`), inserts one row
    (:meth:`_insert`: False when its key is taken), stores a vector
    (:meth:`_store_vector`), writes the full-text index rows of the new memories and
    turns (:meth:`_index_memories`, :meth:`_index_turns`) and checks the references at
    the end (:meth:`_finish_load`).

    Attributes:
        inserted: rows inserted per table.
        skipped: rows skipped per table because an identical row was there already.
    """

    store: _LoadTarget
    c: Any
    dim: int
    #: Tables whose rows the store's own rows win over: a row whose key is taken by a
    #: different row is skipped instead of stopping the load (an import that merges).
    keep_existing: frozenset[str] = frozenset()
    inserted: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    _cols: dict[str, list[Column]] = field(default_factory=dict)
    _new_memories: dict[int, None] = field(default_factory=dict)
    _new_turns: dict[int, None] = field(default_factory=dict)
    _new_vectors: set[tuple[str, int]] = field(default_factory=set)
    _touched: set[str] = field(default_factory=set)

    # Tables rebuilt from the rows, never loaded; text may hold NUL; vectors may hold NaN.
    derived = frozenset[str]()
    nul_in_text = True
    non_finite_vectors = True

    @abstractmethod
    def _columns(self, table: str) -> list[Column]:
        """The archived columns of ``table`` from the backend's catalogue ([]: none)."""

    @abstractmethod
    def _insert(self, table: str, names: Sequence[str], values: Sequence[Any]) -> bool:
        """Insert one row; False when its key is taken.

        Raises:
            ArchiveInvalid: the database refused the row for another reason.
        """

    @abstractmethod
    def _store_vector(self, space: str, key: int, vector: np.ndarray) -> None:
        """Store one vector of a row this load inserted, in this transaction."""

    @abstractmethod
    def _index_memories(self, recs: Sequence[MemoryRecord]) -> None:
        """Write the full-text index rows of these memories this load inserted."""

    @abstractmethod
    def _index_turns(self, turns: Sequence[tuple[int, str, str]]) -> None:
        """Write the full-text index rows of these (id, speaker, text) turns."""

    @abstractmethod
    def _finish_load(self) -> None:
        """What ends a load on this backend (reference checks, id sequences).

        Raises:
            ArchiveInvalid: a row refers to a row that is not there.
        """

    def meta(self, key: str) -> str | None:
        """One ``db_meta`` value as this transaction sees it."""
        return _meta(self.c, key)

    def set_meta(self, key: str, value: str) -> None:
        """Write one ``db_meta`` value in this transaction."""
        self.c.execute("INSERT INTO db_meta(key, value) VALUES (?, ?) ON CONFLICT(key) "
                       "DO UPDATE SET value = excluded.value", (key, value))

    def _columns_of(self, table: str) -> list[Column]:
        cols = self._cols.get(table)
        if cols is None:
            if table in self.derived:
                raise ArchiveInvalid(f"the store has no table {table!r} to load")
            cols = self._cols[table] = self._columns(table)
            if not cols:
                raise ArchiveInvalid(f"the store has no table {table!r} to load")
        return cols

    def _check(self, table: str, row: Mapping[str, Any]) -> list[Column]:
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
            check_value(table, col, value)
            if not self.nul_in_text and isinstance(value, str) and "\x00" in value:
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
        self._add_row(table, cols, row)

    def _add_row(self, table: str, cols: Sequence[Column], row: Mapping[str, Any]) -> None:
        """Insert one checked row of an ordinary table, or skip it (see :meth:`add`)."""
        names = [col.name for col in cols if col.name in row]
        if not self._insert(table, names, [row[n] for n in names]):
            self._collision(table, cols, row)
            return
        self._count_inserted(table, [row.get("id")])

    def _count_inserted(self, table: str, ids: Sequence[Any]) -> None:
        """Count rows inserted into ``table`` (``ids``: their ids, for memories and turns)."""
        self._touched.add(table)
        self.inserted[table] = self.inserted.get(table, 0) + len(ids)
        if table == "memories":
            self._new_memories.update(dict.fromkeys(int(i) for i in ids))
        elif table == "turns":
            self._new_turns.update(dict.fromkeys(int(i) for i in ids))

    def _collision(self, table: str, cols: Sequence[Column], row: Mapping[str, Any]) -> None:
        keys = [col.name for col in cols if col.pk] or [cols[0].name]
        names = [col.name for col in cols]
        where = " AND ".join(f"{quote(k)} = ?" for k in keys)
        found = self.c.execute(
            f"SELECT {', '.join(map(quote, names))} FROM {quote(table)} WHERE {where}",
            [row.get(k) for k in keys]).fetchone()
        wanted = tuple(row.get(n) for n in names)
        differs = found is None or tuple(_plain(v) for v in found) != wanted
        if differs and (found is None or table not in self.keep_existing):
            raise taken(table, ", ".join(f"{k}={row.get(k)!r}" for k in keys))
        self._count_skipped(table, 1)

    def _count_skipped(self, table: str, n: int) -> None:
        """Count ``n`` rows of ``table`` skipped because identical rows were there."""
        self.skipped[table] = self.skipped.get(table, 0) + n

    def _add_meta(self, row: Mapping[str, Any]) -> None:
        key, value = row.get("key"), row.get("value")
        if not isinstance(key, str) or not isinstance(value, str):
            raise ArchiveInvalid("db_meta rows need a text key and value")
        if key in OWN_META or key.startswith(IMPORT_META_PREFIX):
            return
        found = self.c.execute("INSERT INTO db_meta(key, value) VALUES (?, ?) "
                               "ON CONFLICT (key) DO NOTHING RETURNING 1", (key, value)).fetchone()
        counter = self.inserted if found else self.skipped
        counter["db_meta"] = counter.get("db_meta", 0) + 1

    def _add_vector(self, row: Mapping[str, Any]) -> None:
        space, key, blob = row.get("space"), row.get("key"), row.get("v")
        if not isinstance(space, str) or not isinstance(key, int) or not isinstance(blob, bytes):
            raise ArchiveInvalid("vectors rows need space, key and v")
        # A turn's sentence vectors (space kind "s", recall/sentences.py) are one row of
        # a multiple of the dimension.
        sentences = space.startswith("s:") and len(blob) % (4 * self.dim) == 0
        if len(blob) != 4 * self.dim and not (sentences and blob):
            raise ArchiveInvalid(f"vector {space}/{key} has {len(blob) // 4} dimensions; "
                                 f"the embedder has {self.dim}")
        vec = np.frombuffer(blob, dtype=np.float32)
        if not self.non_finite_vectors and not np.isfinite(vec).all():
            raise ArchiveInvalid(f"vector {space}/{key} holds a NaN or infinity")
        self._add_checked_vector(space, key, blob, vec)

    def _add_checked_vector(self, space: str, key: int, blob: bytes, vec: np.ndarray) -> None:
        """Insert one checked archived vector, or skip it when the same one is there."""
        found = self.c.execute("SELECT v FROM vectors WHERE space = ? AND key = ?",
                               (space, key)).fetchone()
        if found is not None:
            if bytes(found[0]) != blob and "vectors" not in self.keep_existing:
                raise vector_differs(space, key)
            self._count_skipped("vectors", 1)
            return
        self.put_vector(space, key, vec)

    def put_vector(self, space: str, key: int, vector: np.ndarray) -> None:
        """Store one vector in this transaction."""
        self._store_vector(space, key, vector)
        self._count_vectors([(space, key)])

    def _count_vectors(self, keys: Sequence[tuple[str, int]]) -> None:
        """Count vectors inserted by this load (``keys``: their (space, key))."""
        self._new_vectors.update(keys)
        self.inserted["vectors"] = self.inserted.get("vectors", 0) + len(keys)

    def is_new(self, space: str, key: int) -> bool:
        """Whether the memory or turn behind a vector key was inserted by this load."""
        ids = self._new_memories if space.startswith("m:") else self._new_turns
        return key in ids and (space, key) not in self._new_vectors

    def finish(self) -> None:
        """Index the new rows for full-text search and check every reference.

        Raises:
            ArchiveInvalid: a row refers to a memory, turn or cluster that is not there.
        """
        self._index_new(list(self._new_memories), list(self._new_turns))
        self._finish_load()

    def _index_new(self, memories: Sequence[int], turns: Sequence[int]) -> None:
        """Write the full-text index rows of the memories and turns this load inserted,
        read back a chunk at a time."""
        step = self.store._chunk
        for start in range(0, len(memories), step):
            chunk = memories[start:start + step]
            rows = self.c.execute(f"SELECT {MEMORY_COLUMNS} FROM memories "
                                  f"WHERE id IN ({placeholders(len(chunk))})", chunk).fetchall()
            self._index_memories([memory_from_row(r) for r in rows])
        for start in range(0, len(turns), step):
            chunk = turns[start:start + step]
            rows = self.c.execute("SELECT id, speaker, text FROM turns "
                                  f"WHERE id IN ({placeholders(len(chunk))})", chunk).fetchall()
            self._index_turns([(int(t), str(s), str(x)) for t, s, x in rows])


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
