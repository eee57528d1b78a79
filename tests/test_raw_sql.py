"""The tests run their own SQL only through tests/backend.py (issue 11, "Shape": the
tests' raw SQL behind one backend fixture).

Its helpers (``rows``, ``scalar``, ``run``, ``run_all``, ``schema_version``,
``migrated_from``; ``sqlite_file`` for a file of an old schema, ``sqlite_conn`` for
SQLite-only settings) are the one seam between the tests and a store's connection, so a
test written for one backend's connection handling does not pass there and break on the
other; the PostgreSQL-internals tests (plans, the pool, COPY) take the driver's
connection from ``tests/postgres/conftest.py``'s ``pg_database``. Reaching for a store's
``db`` (``mem.store.db``: its ``read``/``write`` transactions, its raw connection, its
backups and meta rows) anywhere else goes around them.
"""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# The helpers themselves: the only modules that may take a store's ``db``.
_SEAMS = {TESTS / "backend.py", TESTS / "postgres" / "conftest.py"}


def db_reaches(source: str) -> list[int]:
    """The lines of ``source`` that take an attribute named ``db`` (``x.db``), found in
    its tokens: a file name such as ``"store.db"`` or a comment does not count."""
    found: list[int] = []
    previous: tokenize.TokenInfo | None = None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if (tok.type == tokenize.NAME and tok.string == "db" and previous is not None
                and previous.type == tokenize.OP and previous.string == "."):
            found.append(tok.start[0])
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            previous = tok
    return found


def test_the_check_sees_a_reach_and_not_a_file_name() -> None:
    source = ('path = tmp_path / "store.db"  # mem.store.db in a comment\n'
              "with mem.store.db.read() as c:\n    pass\n"
              "db = store\\\n    .db\n")
    assert db_reaches(source) == [2, 5]


def test_no_test_module_opens_a_store_connection_itself() -> None:
    found = [f"{path.relative_to(TESTS)}:{n}: {path.read_text('utf-8').splitlines()[n - 1].strip()}"
             for path in sorted(TESTS.rglob("*.py")) if path not in _SEAMS
             for n in db_reaches(path.read_text("utf-8"))]
    assert found == []
