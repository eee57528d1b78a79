"""Rows whose times are not real instants, for ``doctor``: find them, and repair them.

Times are range-checked where they enter (:mod:`tideline.times`), but a store
written before that check may hold ``1e20`` as an event time or a turn
timestamp. Reading such a row never fails (it is clamped or skipped); ``doctor``
reports it and ``doctor --repair`` rewrites it: an optional time (a memory's
event time, a turn's timestamp) becomes unknown (NULL), a required one is
clamped into range. The old values are kept in the ``doctor`` journal event.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from tideline.store.rows import TIME_COLUMNS as COLUMNS
from tideline.times import MAX_TS, MIN_TS, clamped_time

__all__ = ["count", "repair"]

_LIMIT = 1000  # rows shown per column in the journal event


def _bad(column: str) -> str:
    # Inf is stored as a REAL and compares beyond either bound; text has another type.
    return (f"{column} IS NOT NULL AND (typeof({column}) NOT IN ('real', 'integer') "
            f"OR {column} < {MIN_TS!r} OR {column} > {MAX_TS!r})")


def count(c: sqlite3.Connection) -> dict[str, int]:
    """How many rows hold an impossible time, per ``table.column``."""
    return {f"{table}.{column}": int(c.execute(
        f"SELECT count(*) FROM {table} WHERE {_bad(column)}").fetchone()[0])
        for table, column, _ in COLUMNS}


def repair(c: sqlite3.Connection) -> dict[str, Any]:
    """Rewrite every impossible time inside the caller's write transaction.

    Returns:
        ``{"rows": n, "old": {"table.column": [[id, old value as text], …]}}``.
    """
    fixed = 0
    old: dict[str, list[list[Any]]] = {}
    for table, column, nullable in COLUMNS:
        rows = c.execute(
            f"SELECT id, {column} FROM {table} WHERE {_bad(column)}").fetchall()
        if not rows:
            continue
        old[f"{table}.{column}"] = [[rid, repr(value)] for rid, value in rows[:_LIMIT]]
        for rid, value in rows:
            if nullable:
                new: float | None = None
            elif isinstance(value, int | float):
                new = clamped_time(value)
            else:  # text where a time belongs: the repair time is the best there is
                new = time.time()
            c.execute(f"UPDATE {table} SET {column} = ? WHERE id = ?", (new, rid))
        fixed += len(rows)
    return {"rows": fixed, "old": old}
