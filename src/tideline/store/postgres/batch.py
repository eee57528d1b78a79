"""``executemany`` as a few set-based statements: what sleep's bulk writes cost on PostgreSQL.

The shared views hand their bulk writes to ``executemany`` with one row's SQL (portable,
the same text on SQLite, where a statement per row is cheap: it runs in process). On
PostgreSQL each row is then one statement for the client to bind and send and the
server to execute (30,000 cluster memberships upserted one by one: 2.3 s of the sleep at
10k memories). :func:`plan` rewrites the three shapes those writes take into one
statement per 10,000 rows that reads its rows from one array parameter per column
(``unnest``: the SQL text does not depend on the row count, so psycopg prepares it once
and the server plans it once, where a multi-row ``VALUES`` list of 4,000 parameters took
16 ms to plan):

* ``INSERT INTO t(cols) VALUES (?, 'literal', …) [ON CONFLICT …]`` →
  ``INSERT INTO t(cols) SELECT v.c0, 'literal', … FROM unnest(?::type[], …) AS v(c0, …)``;
* ``UPDATE t SET col = ?, col = expr, … WHERE col = ? AND …`` →
  ``UPDATE t SET col = v.c0, … FROM unnest(…) AS v(…) WHERE col = v.c1 AND …``;
* ``DELETE FROM t WHERE col = ? AND …`` → ``DELETE FROM t USING unnest(…) AS v(…) …``.

Results are those of running the rows one after the other, in order:

* a chunk never holds two rows for the same target row where that could matter — an
  ``ON CONFLICT (key) DO UPDATE`` insert or an ``UPDATE`` (whose ``WHERE`` must name the
  whole primary key) starts a new chunk when a key repeats (one statement cannot update
  a row twice, the rows in order can: ``SET size = size + 1`` twice adds 2), so inside
  a chunk the rows touch disjoint rows and their order does not matter; chunks run in
  order;
* a ``DELETE`` of the same row twice deletes it once either way (the count too);
* every array is cast to its column's type (read once from the catalog), so a ``NULL``
  or a small integer means what it meant in the one-row statement;
* the changed-row count is the sum over the statements.

Anything else — a subquery, ``RETURNING``, a ``?`` inside an expression, an ``UPDATE``
without its primary key in ``WHERE``, a column type outside :data:`_TYPES` — runs row by
row as before (psycopg's own ``executemany``, pipelined). What stays per row on the
server is the work of the rows themselves: index entries and, for every foreign key, a
trigger that looks the parent row up and locks it (two thirds of the time of a batch of
cluster memberships, by ``EXPLAIN ANALYZE``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Batch", "Columns", "plan"]

#: What the catalog says about a table: column → SQL type, and the primary key columns.
Columns = tuple[dict[str, str], tuple[str, ...]]

_MAX_ROWS = 10_000  # rows per statement (one array per column)
#: Column types rewritten (their arrays bind from Python lists as they are).
_TYPES = frozenset({"bigint", "integer", "smallint", "double precision", "real", "text",
                    "bytea"})
_FLOATS = frozenset({"double precision", "real"})
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_INSERT = re.compile(
    rf"^\s*INSERT\s+INTO\s+({_IDENT})\s*\(([^()]*)\)\s*VALUES\s*\(([^()]*)\)\s*(.*?)\s*$",
    re.S | re.I)
_UPDATE = re.compile(rf"^\s*UPDATE\s+({_IDENT})\s+SET\s+(.*?)\s+WHERE\s+(.*?)\s*$",
                     re.S | re.I)
_DELETE = re.compile(rf"^\s*DELETE\s+FROM\s+({_IDENT})\s+WHERE\s+(.*?)\s*$", re.S | re.I)
_LITERAL = re.compile(r"^'[^'?%]*'$|^-?[0-9]+(\.[0-9]+)?$")
_CONFLICT = re.compile(r"^ON\s+CONFLICT\s*\(([^()]*)\)\s*DO\s+UPDATE\b", re.I)
_NOTHING = re.compile(r"^ON\s+CONFLICT\s*(\([^()]*\))?\s*DO\s+NOTHING$", re.I)
_EQ_PARAM = re.compile(rf"^({_IDENT})\s*=\s*\?$")
_AND = re.compile(r"\s+AND\s+", re.I)
_UNSAFE = re.compile(r"[()?;%]|\bselect\b|\breturning\b|\bor\b", re.I)


@dataclass(frozen=True)
class Batch:
    """One rewritten statement: its SQL for ``rows`` rows, how to key a row, and which
    parameters of a row it binds (in order)."""

    table: str
    build: Callable[[dict[str, str]], str]
    key: tuple[int, ...] | None  # positions whose values must not repeat inside a chunk
    key_columns: tuple[str, ...]  # the columns ``key`` must cover (the primary key)
    width: int
    typed: tuple[str, ...]  # column whose type each parameter takes


def _unnest(typed: Sequence[str], names: Sequence[str], types: dict[str, str]) -> str:
    arrays = ", ".join(f"%s::{types[c]}[]" for c in typed)
    return f"unnest({arrays}) AS v({', '.join(names)})"


def _columns(text: str) -> list[str] | None:
    cols = [c.strip() for c in text.split(",")]
    return cols if all(re.fullmatch(_IDENT, c) for c in cols) else None


def _insert(m: re.Match[str]) -> Batch | None:
    table, cols, values, tail = m.group(1), _columns(m.group(2)), m.group(3), m.group(4)
    if cols is None or "?" in tail or "%" in tail or re.search(r"\breturning\b", tail, re.I):
        return None
    items = [v.strip() for v in values.split(",")]
    if len(items) != len(cols) or not all(v == "?" or _LITERAL.match(v) for v in items):
        return None
    params = [i for i, v in enumerate(items) if v == "?"]
    typed = tuple(cols[i] for i in params)
    key: tuple[int, ...] | None = None
    key_columns: tuple[str, ...] = ()
    conflict = _CONFLICT.match(tail)
    if conflict is not None:  # DO UPDATE: one statement cannot touch a row twice
        target = _columns(conflict.group(1))
        if target is None or "select" in tail.casefold():
            return None
        positions = []
        for col in target:
            if col not in cols:
                return None
            if items[cols.index(col)] == "?":
                positions.append(typed.index(col))
        if not positions:  # every row the same key: nothing to batch
            return None
        key = tuple(positions)
    elif tail and not _NOTHING.match(tail):  # only no clause or DO NOTHING, else row by row
        return None

    names = [f"_tl{i}" for i in range(len(typed))]

    def build(types: dict[str, str]) -> str:
        it = iter(names)
        select = ", ".join(f"v.{next(it)}" if v == "?" else v for v in items)
        return (f"INSERT INTO {table}({', '.join(cols)}) SELECT {select} FROM "
                f"{_unnest(typed, names, types)}" + (f" {tail}" if tail else ""))

    return Batch(table, build, key, key_columns, len(params), typed)


def _conditions(text: str) -> tuple[list[str], list[str]] | None:
    """``col = ?`` columns (in order) and the other conjuncts of a WHERE, or None."""
    params: list[str] = []
    fixed: list[str] = []
    for part in _AND.split(text):
        eq = _EQ_PARAM.match(part.strip())
        if eq is not None:
            params.append(eq.group(1))
        elif _UNSAFE.search(part):
            return None
        else:
            fixed.append(part.strip())
    return params, fixed


def _update(m: re.Match[str]) -> Batch | None:
    table, sets, where = m.group(1), m.group(2), m.group(3)
    assigned: list[tuple[str, str | None]] = []  # (column, fixed expression or None for ?)
    for part in sets.split(","):
        col, eq, expr = part.partition("=")
        col, expr = col.strip(), expr.strip()
        if not eq or not re.fullmatch(_IDENT, col):
            return None
        if expr == "?":
            assigned.append((col, None))
        elif _UNSAFE.search(expr):
            return None
        else:
            assigned.append((col, expr))
    cond = _conditions(where)
    if cond is None:
        return None
    wcols, fixed = cond
    set_params = [c for c, e in assigned if e is None]
    typed = (*set_params, *wcols)
    names = [f"_tl{i}" for i in range(len(typed))]
    key = tuple(len(set_params) + i for i in range(len(wcols)))

    def build(types: dict[str, str]) -> str:
        it = iter(names)
        sql_set = ", ".join(f"{c} = v.{next(it)}" if e is None else f"{c} = {e}"
                            for c, e in assigned)
        conds = [f"{c} = v.{next(it)}" for c in wcols] + fixed
        return (f"UPDATE {table} SET {sql_set} FROM {_unnest(typed, names, types)} "
                f"WHERE {' AND '.join(conds)}")

    # The rows' WHERE must name the primary key (checked against the catalog): then
    # each keeps to one row, and a key repeated inside a chunk starts the next chunk.
    return Batch(table, build, key, tuple(wcols), len(typed), typed)


def _delete(m: re.Match[str]) -> Batch | None:
    table, where = m.group(1), m.group(2)
    cond = _conditions(where)
    if cond is None or not cond[0]:
        return None
    wcols, fixed = cond
    names = [f"_tl{i}" for i in range(len(wcols))]

    def build(types: dict[str, str]) -> str:
        conds = [f"{c} = v.{n}" for c, n in zip(wcols, names, strict=True)] + fixed
        return (f"DELETE FROM {table} USING {_unnest(wcols, names, types)} "
                f"WHERE {' AND '.join(conds)}")

    return Batch(table, build, None, (), len(wcols), tuple(wcols))


def parse(sql: str) -> Batch | None:
    """The set-based form of a one-row statement, or None to run it row by row."""
    for pattern, make in ((_INSERT, _insert), (_UPDATE, _update), (_DELETE, _delete)):
        m = pattern.match(sql)
        if m is not None:
            return make(m)
    return None


def plan(batch: Batch, columns: Columns, rows: Sequence[Sequence[Any]],
         ) -> list[tuple[str, list[list[Any]]]] | None:
    """Statements (SQL for psycopg, one array parameter per column) running ``rows`` in
    order, or None when the rewrite does not apply: an unknown column or one of a type
    outside :data:`_TYPES`, an ``UPDATE`` whose ``WHERE`` misses part of the primary key,
    a row of another width, a column mixing Python types."""
    types, primary = columns
    if not all(types.get(c) in _TYPES for c in batch.typed):
        return None
    if batch.key_columns and (not primary or not set(primary) <= set(batch.key_columns)):
        return None
    key = batch.key
    if batch.key_columns:  # an UPDATE: key its rows by their primary key values
        key = tuple(len(batch.typed) - len(batch.key_columns) + batch.key_columns.index(c)
                    for c in primary)
    floats = [types[c] in _FLOATS for c in batch.typed]
    chunks: list[list[list[Any]]] = []
    current: list[list[Any]] = [[] for _ in batch.typed]
    size = 0
    seen: set[tuple[Any, ...]] = set()
    for row in rows:
        if len(row) != batch.width:
            return None
        k = tuple(row[i] for i in key) if key else None
        if size >= _MAX_ROWS or (k is not None and k in seen):
            chunks.append(current)
            current, size, seen = [[] for _ in batch.typed], 0, set()
        for col, value, to_float in zip(current, row, floats, strict=True):
            # 1 and 0.5 in one float column: one array type for psycopg (the one-row
            # statement converted the integer too).
            col.append(float(value) if to_float and type(value) is int else value)
        size += 1
        if k is not None:
            seen.add(k)
    if size:
        chunks.append(current)
    for chunk in chunks:
        for col in chunk:
            if len({type(v) for v in col if v is not None}) > 1:
                return None
    sql = batch.build(types)
    return [(sql, chunk) for chunk in chunks]
