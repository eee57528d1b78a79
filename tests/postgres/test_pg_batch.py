"""Issue 11: PostgreSQL's ``executemany`` runs many rows as a few set-based statements
(``store/postgres/batch.py``) with the result of running them one by one, in order.

Each case runs the same rows through ``Conn.executemany`` and, on a twin table, one
``execute`` per row (the reference), and compares every row and the changed-row count.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tideline.store.postgres.batch import parse, plan
from tideline.store.postgres.connection import Database
from tideline.store.postgres.session import Conn

_TABLES = """
CREATE TABLE {t} (id bigint PRIMARY KEY, n integer NOT NULL DEFAULT 0,
                  w double precision, label text, ver integer NOT NULL DEFAULT 0);
CREATE TABLE {t}_pair (a bigint, b bigint, kind text, w double precision,
                       PRIMARY KEY (a, b, kind));
"""

_SQL = {
    "upsert_adds": "INSERT INTO {t}(id, n, w, label) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO "
                   "UPDATE SET n = {t}.n + excluded.n, w = excluded.w, label = excluded.label",
    "insert_or_skip": "INSERT INTO {t}(id, n, w, label) VALUES (?, ?, ?, ?) "
                      "ON CONFLICT (id) DO NOTHING",
    "pair_upsert": "INSERT INTO {t}_pair(a, b, kind, w) VALUES (?, ?, 'co', ?) "
                   "ON CONFLICT(a, b, kind) DO UPDATE SET w = {t}_pair.w + excluded.w",
    "pair_skip": "INSERT INTO {t}_pair(a, b, kind, w) VALUES (?, ?, 'co', ?) "
                 "ON CONFLICT DO NOTHING",
    "update_checked": "UPDATE {t} SET n = ?, w = ?, ver = ver + 1 WHERE id = ? AND ver = ?",
    "update_bump": "UPDATE {t} SET n = n + 1 WHERE id = ?",
    "update_filtered": "UPDATE {t} SET label = ?, ver = ver + 1 WHERE id = ? AND "
                       "label IS NOT NULL",
    "delete": "DELETE FROM {t} WHERE id = ? AND n = ?",
    "pair_delete": "DELETE FROM {t}_pair WHERE a = ? AND b = ? AND kind = 'co'",
}

_ids = st.integers(1, 6)
_w = st.one_of(st.none(), st.floats(-4, 4, allow_nan=False), st.integers(-3, 3))
_label = st.one_of(st.none(), st.text("abc%?'", max_size=3))
_ROWS = {
    "upsert_adds": st.tuples(_ids, st.integers(0, 5), _w, _label),
    "insert_or_skip": st.tuples(_ids, st.integers(0, 5), _w, _label),
    "pair_upsert": st.tuples(_ids, _ids, st.floats(0, 1, allow_nan=False)),
    "pair_skip": st.tuples(_ids, _ids, st.floats(0, 1, allow_nan=False)),
    "update_checked": st.tuples(st.integers(-2, 2), _w, _ids, st.integers(0, 2)),
    "update_bump": st.tuples(_ids),
    "update_filtered": st.tuples(st.text("xy", max_size=2), _ids),
    "delete": st.tuples(_ids, st.integers(0, 5)),
    "pair_delete": st.tuples(_ids, _ids),
}


@pytest.fixture(scope="module")
def db(pg_server: Any) -> Iterator[Database]:
    # A name of its own: this module-scoped database outlives the per-test ones.
    name = f"batch_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    with tempfile.TemporaryDirectory() as tmp:
        database = Database(str(pg_server.get_uri(name)), Path(tmp))
        with database.write() as c:
            for t in ("batched", "single"):
                for stmt in _TABLES.format(t=t).split(";"):
                    if stmt.strip():
                        c.execute(stmt)
        try:
            yield database
        finally:
            database.close()


def _seed(c: Conn, t: str) -> None:
    c.execute(f"DELETE FROM {t}")
    c.execute(f"DELETE FROM {t}_pair")
    c.executemany(f"INSERT INTO {t}(id, n, w, label, ver) VALUES (?, ?, ?, ?, ?)",
                  [(1, 1, 0.5, "a", 0), (2, 2, None, None, 1), (3, 3, 1.5, "b", 2)])
    for a, b in ((1, 2), (2, 1), (3, 4)):
        c.execute(f"INSERT INTO {t}_pair(a, b, kind, w) VALUES (?, ?, 'co', 0.25)", (a, b))


def _dump(c: Conn, t: str) -> tuple[list[Any], list[Any]]:
    return ([tuple(r) for r in c.execute(f"SELECT * FROM {t} ORDER BY id").fetchall()],
            [tuple(r) for r in c.execute(f"SELECT * FROM {t}_pair ORDER BY a, b").fetchall()])


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(sorted(_SQL)), data=st.data())
def test_many_rows_at_once_equal_the_rows_one_by_one(db: Database, case: str,
                                                     data: st.DataObject) -> None:
    rows = data.draw(st.lists(_ROWS[case], min_size=2, max_size=12))
    assert parse(_SQL[case].format(t="batched")) is not None  # the set-based path is taken
    with db.write() as c:
        _seed(c, "batched")
        _seed(c, "single")
        changed = c.executemany(_SQL[case].format(t="batched"), rows).rowcount
        expected = 0
        for row in rows:
            expected += max(c.execute(_SQL[case].format(t="single"), row).rowcount, 0)
        assert _dump(c, "batched") == _dump(c, "single")
        assert changed == expected


def test_thousands_of_rows_are_a_few_statements(db: Database, tmp_path: Path) -> None:
    """Counted in libpq's trace: 5,000 upserts were 5,000 Execute messages, now one."""
    rows = [(i, 1, 0.5, "x") for i in range(5_000)]
    trace = tmp_path / "trace"
    with db.write() as c:
        _seed(c, "batched")
        with trace.open("w") as out:
            c.raw.pgconn.trace(out.fileno())
            try:
                assert c.executemany(_SQL["upsert_adds"].format(t="batched"),
                                     rows).rowcount == 5_000
            finally:
                c.raw.pgconn.untrace()
    executes = sum(1 for line in trace.read_text().splitlines() if "\tExecute\t" in line)
    assert 1 <= executes <= 2


@pytest.mark.parametrize(("sql", "rows"), [
    ("UPDATE {t} SET n = (SELECT max(n) FROM {t}) + 1 WHERE id = ?", [(1,), (1,), (2,)]),
    ("INSERT INTO {t}(id) VALUES (?) RETURNING id", [(7,), (8,)]),
    ("UPDATE {t} SET n = n + 1 WHERE label = ?", [("a",), ("a",), ("b",)]),
])
def test_what_the_rewrite_does_not_cover_still_runs_row_by_row(
        db: Database, sql: str, rows: list[tuple[Any, ...]]) -> None:
    """A subquery, RETURNING, an UPDATE whose WHERE misses the primary key."""
    with db.write() as c:
        batch = parse(sql.format(t="batched"))
        assert batch is None or plan(batch, c.columns("batched") or ({}, ()), rows) is None
        _seed(c, "batched")
        _seed(c, "single")
        c.executemany(sql.format(t="batched"), rows)
        for row in rows:
            c.execute(sql.format(t="single"), row)
        assert _dump(c, "batched") == _dump(c, "single")


def test_shapes_whose_batch_could_differ_are_not_rewritten() -> None:
    assert parse("INSERT INTO t(a, b) VALUES (?, ?) ON CONFLICT ON CONSTRAINT t_pkey "
                 "DO UPDATE SET b = excluded.b") is None
    assert parse("INSERT INTO t(k, b) VALUES ('one', ?) ON CONFLICT (k) "
                 "DO UPDATE SET b = t.b + excluded.b") is None
    assert parse("UPDATE t SET a = a + ? WHERE id = ?") is None
    assert parse("UPDATE t SET a = ? WHERE id = ? OR id = 0") is None
    assert parse("DELETE FROM t WHERE id IN (?, ?)") is None


def test_a_key_repeated_in_one_batch_starts_the_next_statement() -> None:
    batch = parse("UPDATE t SET n = n + 1 WHERE id = ?")
    assert batch is not None
    statements = plan(batch, ({"id": "bigint", "n": "integer"}, ("id",)),
                      [(1,), (2,), (1,), (1,), (3,)])
    assert statements is not None
    assert [p for _, p in statements] == [[[1, 2]], [[1]], [[1, 3]]]
    assert plan(batch, ({"id": "bigint", "n": "integer"}, ("id", "k")), [(1,)]) is None

