"""The few SQL fragments that differ between the backends.

The SQL shared by every backend (the per-topic views over one namespace) is written in
the subset SQLite 3.35+ and PostgreSQL both accept: ``?`` placeholders (the PostgreSQL
connection translates them), ``INSERT … ON CONFLICT … DO NOTHING / DO UPDATE`` instead
of ``INSERT OR IGNORE / REPLACE``, ``RETURNING id`` instead of ``lastrowid``, and
``coalesce``. What cannot be written once is asked of the connection's dialect:
reading a key of a JSON text column, expanding a JSON array into rows, and whole days
between two epoch times.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["POSTGRES", "SQLITE", "Dialect", "PostgresDialect", "SQLiteDialect"]


def _key(key: str) -> str:
    if not key.replace("_", "").isalnum():
        raise ValueError(f"JSON key {key!r}")
    return key


class Dialect(Protocol):
    """SQL fragments for one backend. Every method returns SQL text (no parameters)."""

    name: str
    #: A statement that makes the current write transaction commit without waiting for
    #: its log to reach the disk, or None where commits already do not wait for that.
    relaxed_commit: str | None

    def json_text(self, column: str, key: str) -> str:
        """The value at ``key`` of a JSON object column, as text (NULL when absent)."""

    def json_number(self, column: str, key: str) -> str:
        """The value at ``key`` as a number (NULL when absent)."""

    def json_flag(self, column: str, key: str) -> str:
        """A condition: the value at ``key`` is true (absent, false, 0 or null: not)."""

    def json_items(self, expression: str, alias: str) -> str:
        """A FROM item with one row per element of a JSON array; ``alias.value`` is the
        element (as text on PostgreSQL, as stored on SQLite)."""

    def whole(self, expression: str) -> str:
        """A non-negative number cut down to an integer (``CAST … AS INTEGER`` truncates
        on SQLite and rounds on PostgreSQL)."""


class SQLiteDialect:
    """SQLite's JSON1 functions."""

    name = "sqlite"
    relaxed_commit: str | None = None  # synchronous = NORMAL: a WAL commit waits for no fsync

    def json_text(self, column: str, key: str) -> str:
        return f"CAST(json_extract({column}, '$.{_key(key)}') AS TEXT)"

    def json_number(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{_key(key)}')"

    def json_flag(self, column: str, key: str) -> str:
        return f"coalesce(json_extract({column}, '$.{_key(key)}'), 0) != 0"

    def json_items(self, expression: str, alias: str) -> str:
        return f"json_each({expression}) {alias}"

    def whole(self, expression: str) -> str:
        return f"CAST({expression} AS INTEGER)"


class PostgresDialect:
    """PostgreSQL's ``jsonb`` operators over text columns that hold JSON."""

    name = "postgresql"
    relaxed_commit: str | None = "SET LOCAL synchronous_commit = off"

    def json_text(self, column: str, key: str) -> str:
        return f"(({column})::jsonb ->> '{_key(key)}')"

    def json_number(self, column: str, key: str) -> str:
        k = _key(key)
        return (f"(CASE jsonb_typeof(({column})::jsonb -> '{k}') WHEN 'number' THEN "
                f"(({column})::jsonb ->> '{k}')::double precision WHEN 'boolean' THEN "
                f"(CASE WHEN (({column})::jsonb -> '{k}')::boolean THEN 1 ELSE 0 END) END)")

    def json_flag(self, column: str, key: str) -> str:
        k = _key(key)
        return (f"coalesce((({column})::jsonb ->> '{k}') NOT IN "
                f"('false', '0', '0.0', 'null', ''), false)")

    def json_items(self, expression: str, alias: str) -> str:
        return f"jsonb_array_elements_text(({expression})::jsonb) AS {alias}(value)"

    def whole(self, expression: str) -> str:
        return f"floor({expression})::bigint"


#: The dialect of each backend.
SQLITE = SQLiteDialect()
POSTGRES = PostgresDialect()
