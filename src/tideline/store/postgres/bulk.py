"""Bulk loads on PostgreSQL: ``COPY`` instead of a statement per row, and the derived
indexes of an empty table built once after the load instead of row by row.

A row at a time, a load paid a round trip per memory (its ``RETURNING id``) and an HNSW
insert into a growing graph per vector (1.2 ms each at 4k vectors and rising; ~73
memories/s at 100k). Here the ids come from the identity sequence in one statement per
batch, and memories, their index rows and their vectors each go in one ``COPY`` (the
vectors in binary: no float is printed or parsed).

A derived table (``vectors``, ``memories_lex``, ``turns_lex``) that holds fewer rows
than the load brings (``expected``; empty, without a figure) has its secondary
indexes (HNSW, GIN word and trigram) dropped for the load and built again, from their
own definitions, before commit — with ``maintenance_work_mem`` raised so the HNSW
graph fits: building over all rows once costs less than inserting the new ones into
the graph one by one. DDL is transactional here: a load that fails rolls back with its
rows and the indexes are as they were. While it runs, the load holds those tables'
locks, so other sessions wait for it; a table that holds more rows keeps its indexes
and they are maintained row by row.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tideline.store.postgres import lexical as pg_lexical
from tideline.store.rows import json_list, mark_pending, memory_index_text

if TYPE_CHECKING:
    from tideline.models import MemoryRecord
    from tideline.store.postgres.session import Conn

__all__ = ["BUILD_MEMORY_MAX_MB", "copy_index_rows", "copy_vectors", "deferred_indexes",
           "insert_memories"]

#: The most ``maintenance_work_mem`` a load's index build asks for (MB).
BUILD_MEMORY_MAX_MB = 4096
# Per vector in the HNSW build's graph (pgvector, m = 16): the vector and its neighbours.
_GRAPH_BYTES = 600
_DEFERRED = ("vectors", "memories_lex", "turns_lex")
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
_TRAILER = struct.pack("!h", -1)
_MEMORY_COPY = (
    "COPY memories (id, namespace, scope, kind, gesture, context, cognition_direction, "
    "tags, entities_role, related_entities, source_links, importance, emotional, "
    "recurrence, unresolved, weight, strength, stability, reinforcements, last_access, "
    "status, version, supersedes, event_time, recorded_at, updated_at) FROM STDIN")


@contextlib.contextmanager
def deferred_indexes(c: Conn, expected: int | Mapping[str, int] = 0) -> Iterator[None]:
    """Drop the secondary indexes of the derived tables holding fewer rows than
    ``expected`` (one figure, or one per table; at least: empty tables); build them
    again at the end.

    Raises:
        psycopg.Error: the database failed (the caller's transaction rolls back).
    """
    dropped: list[str] = []
    for table in _DEFERRED:
        wanted = expected.get(table, 0) if isinstance(expected, Mapping) else expected
        least = max(int(wanted), 1)
        held = c.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} LIMIT ?) AS held",  # noqa: S608
                         (least,)).fetchone()[0]
        if held >= least:
            continue
        for name, ddl in c.execute(
                "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) "
                "FROM pg_index i WHERE i.indrelid = ?::regclass AND NOT i.indisprimary "
                "AND NOT i.indisunique ORDER BY 1", (table,)).fetchall():
            c.execute(f"DROP INDEX {name}")
            dropped.append(str(ddl))
    yield
    if not dropped:
        return
    rows = int(c.execute("SELECT count(*) FROM vectors").fetchone()[0])
    dim = c.execute("SELECT vector_dims(v) FROM vectors LIMIT 1").fetchone()
    want = rows * (4 * int(dim[0] if dim else 0) + _GRAPH_BYTES) * 5 // 4 // 2**20
    have = int(c.execute("SELECT setting::bigint * 1024 / 1048576 FROM pg_settings "
                         "WHERE name = 'maintenance_work_mem'").fetchone()[0])
    if want > have:
        c.execute("SELECT set_config('maintenance_work_mem', ?, true)",
                  (f"{min(want, BUILD_MEMORY_MAX_MB)}MB",))
    for ddl in dropped:  # IF NOT EXISTS: something in the load may have made one again
        c.execute(ddl.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))
    for table in ("memories", *_DEFERRED):
        c.execute(f"ANALYZE {table}")


def _copy_rows(c: Conn, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    with c.raw.cursor() as cur, cur.copy(sql) as cp:
        for row in rows:
            cp.write_row(row)


def copy_vectors(c: Conn, rows: Sequence[tuple[str, int, np.ndarray]], *,
                 table: str = "vectors") -> None:
    """``COPY`` (space, key, vector) rows into ``vectors`` (or a table of its shape) in
    binary form.

    Raises:
        psycopg.Error: a key is taken, a vector holds a NaN or infinity.
    """
    if not rows:
        return
    parts = [_SIGNATURE]
    for space, key, vector in rows:
        name = space.encode("utf-8")
        arr = np.ascontiguousarray(vector, dtype=">f4").ravel()
        parts.append(struct.pack(f"!hi{len(name)}siqiHH", 3, len(name), name, 8, int(key),
                                 4 + 4 * arr.size, arr.size, 0))
        parts.append(arr.tobytes())
    parts.append(_TRAILER)
    with c.raw.cursor() as cur, cur.copy(f"COPY {table} (space, key, v) FROM STDIN "
                                         "(FORMAT BINARY)") as cp:
        cp.write(b"".join(parts))


def copy_index_rows(c: Conn, table: str, rows: Sequence[tuple[int, str, str]]) -> None:
    """``COPY`` the word and substring index rows of new memories (``memories_lex``) or
    turns (``turns_lex``) from (id, namespace, indexed text) triples."""
    _copy_rows(c, f"COPY {table} (id, namespace, words, subs) FROM STDIN",
               [(i, ns, pg_lexical.words_vector(body), pg_lexical.substring_text(body))
                for i, ns, body in rows])


def insert_memories(c: Conn, namespace: str, space: Any, recs: Sequence[MemoryRecord],
                    vectors: Sequence[np.ndarray | None]) -> list[int]:
    """Insert memories with their index rows and vectors in three ``COPY`` statements.

    Args:
        c: a connection in a bulk transaction (:meth:`Database.bulk`).
        namespace: the namespace written to.
        space: ``(kind, scope) -> space`` of the store.
        recs: the memories (their ids are ignored: new ones are drawn).
        vectors: one per memory; None marks it pending.

    Returns:
        The new ids, in order.

    Raises:
        psycopg.Error: the database refused a row (the transaction rolls back).
    """
    if len(recs) != len(vectors):
        raise ValueError("one vector (or None) per memory")
    if not recs:
        return []
    ids = [int(r[0]) for r in c.execute(
        "SELECT nextval(pg_get_serial_sequence('memories', 'id')) "
        "FROM generate_series(1, ?)", (len(recs),)).fetchall()]
    _copy_rows(c, _MEMORY_COPY, [
        (mid, namespace, r.scope, r.kind, r.gesture, r.context, r.cognition_direction,
         json_list(r.tags), r.entities_role, json_list(r.related_entities),
         json_list(r.source_links), r.importance, r.emotional, r.recurrence, r.unresolved,
         r.weight, r.strength, r.stability, r.reinforcements, r.last_access, r.status,
         r.version, r.supersedes, r.event_time, r.recorded_at, r.updated_at)
        for mid, r in zip(ids, recs, strict=True)])
    copy_index_rows(c, "memories_lex", [(mid, namespace, memory_index_text(r))
                                        for mid, r in zip(ids, recs, strict=True)])
    copy_vectors(c, [(space("m", r.scope), mid, v)
                     for mid, r, v in zip(ids, recs, vectors, strict=True) if v is not None])
    if any(v is None for v in vectors):
        mark_pending(c)
    return ids
