"""Issue 28 §2.9: the report names where the memories are.

On PostgreSQL the report named the local state folder (which holds no memories there)
instead of the database; it now names the database URL with its password masked. On
SQLite it names the store directory, as before.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from tests.backend import Backend
from tests.conftest import hashing

from tideline.report.html import render_html
from tideline.report.text import render_text

pytestmark = pytest.mark.backends

SECRET = "n0t-4-real-pa55word"


def _with_password(url: str) -> str:
    # The embedded test server trusts local connections: a password in the URL is
    # carried (as a user's would be) and never checked.
    parts = urlsplit(url)
    host = f"{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    netloc = f"{parts.username or 'postgres'}:{SECRET}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def test_the_report_names_the_database_not_the_state_folder(tmp_path: Path,
                                                            backend: Backend) -> None:
    home = tmp_path / "state"
    url = _with_password(backend.url) if backend.url else None
    with backend.open(home, url=url, embedder=hashing(), project="global") as mem:
        backend.check(mem)
        mem.write("the atlas release ships on Friday", scope="atlas")
        report = mem.report(days=7)
    where = report["store"]
    texts = (where, render_text(report), render_html(report))
    assert all(SECRET not in t for t in texts)
    if url is None:
        assert where == str(home)
    else:
        name = urlsplit(url).path.lstrip("/")
        assert where.startswith("postgresql://") and f"/{name}" in where
        assert ":***@" in where and str(home) not in where
    assert render_text(report).splitlines()[0].startswith(f"Tideline report — {where} ")
