"""Every page but search reads a page from an index, never a table scan: SQLite's query
plan of each statement the pages send (the recall path has its own cost tests)."""

from __future__ import annotations

import re

from tests.backend import sqlite_conn, sqlite_statement_texts
from tests.ui.helpers import DAY, Page, seed

from tideline import Memory

TABLES = ("memories", "turns", "events", "edges")


def test_pages_read_through_indexes(mem: Memory) -> None:
    s = seed(mem)
    with mem.store.transaction() as c:
        mem.store.add_edge(c, s.porto, s.lisbon, "contradicts", 1.0, 1_800_000_000.0)
    page = Page(mem)
    urls = [f"/memory/{s.lisbon}?scope=alpha", f"/conversations?scope=alpha&day={DAY}",
            "/conversations?scope=*", "/session?scope=alpha&id=s-lisbon",
            "/journal?scope=alpha", "/journal?scope=alpha&group=writes&before=5",
            "/journal?scope=alpha&memory=1", "/conflicts?scope=alpha", "/dream?scope=alpha"]
    page.get("/journal")  # the switcher's scope list is read once and kept
    with sqlite_statement_texts(mem) as texts:
        for url in urls:
            assert page.get(url).status_code == 200, url
    conn = sqlite_conn(mem)
    checked = 0
    for sql in texts:
        if not sql.lstrip().upper().startswith("SELECT") or not any(
                re.search(rf"\b(FROM|JOIN) {t}\b", sql) for t in TABLES):
            continue
        plan = [str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql,
                                                 [1] * sql.count("?")).fetchall()]
        # A walk back by id that stops at the page size is the one scan allowed.
        walk = re.search(r"ORDER BY id DESC LIMIT \?$", sql) and "JOIN" not in sql
        scans = [p for p in plan if re.fullmatch(rf"SCAN ({'|'.join(TABLES)})( AS \w+)?", p)
                 and not walk]
        # "(namespace=?)" alone is every row of the namespace: as bad as a scan here.
        whole = [p for p in plan if p.endswith("(namespace=?)") and "DISTINCT" not in sql]
        assert not scans and not whole, (sql, plan)
        checked += 1
    assert checked >= 10, sorted(texts)
