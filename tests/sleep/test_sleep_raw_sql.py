"""The sleep tests run their own SQL only through tests/backend.py.

Its helpers (``rows``, ``scalar``, ``run``, ``run_all``; ``sqlite_file`` for a file of
an old schema) are the one seam between the tests and a store's connection, so a test
written for one backend's connection handling does not pass there and break on the
other. Reaching for ``mem.store.db`` (its ``read``/``write`` transactions, its raw
connection) goes around it.
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
# A store's connection object, or a transaction of it, taken straight from the store.
_REACH = re.compile(r"\.store\.db\.(read|write|conn|bulk)\b")


def test_no_sleep_test_opens_the_store_connection_itself() -> None:
    found = [f"{path.name}:{n}: {line.strip()}"
             for path in sorted(HERE.glob("*.py")) if path.name != Path(__file__).name
             for n, line in enumerate(path.read_text("utf-8").splitlines(), start=1)
             if _REACH.search(line)]
    assert found == []
