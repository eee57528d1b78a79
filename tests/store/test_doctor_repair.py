"""``doctor --repair`` rebuilds damaged FTS5 indexes and reports the store as it is after.

Issue 9 item 7: with the tail of the database file truncated inside a full-text page,
doctor reported "fts repaired" while the check failed on every later run, and its
report showed the checks from before the repair.

SQLite only (tests/backend.py): it damages FTS5 pages and tables of the file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.conftest import hashing

from tideline import Memory


def _fill(home: Path) -> None:
    with Memory.open(home, embedder=hashing()) as mem:
        for i in range(40):
            mem.remember(f"note {i} on the kiln schedule K-{i:03d} and the heron count {i}")
        mem.add_turns([{"session": "s", "role": "user", "text": f"turn {i} mentions whale-{i}",
                        "id": f"t{i}"} for i in range(120)])


def _tear_tail_of_fts_page(home: Path, table: str) -> int:
    """Zero the last 100 bytes of the newest page of ``table``'s index, as a torn tail does
    (a file cut short inside its last page reads back as zeros)."""
    db = home / "tideline.db"
    conn = sqlite3.connect(db)
    page = conn.execute("SELECT max(pageno) FROM dbstat WHERE name = ?",
                        (f"{table}_data",)).fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    assert page is not None
    with db.open("r+b") as f:
        f.seek(page * size - 100)
        f.write(b"\0" * 100)
    return int(page)


def _doctor(home: Path, *extra: str) -> tuple[int, dict]:
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing")
    proc = subprocess.run([sys.executable, "-m", "tideline", "doctor", "--json", *extra,
                           "--store", str(home)], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    return proc.returncode, json.loads(proc.stdout)


def test_repair_rebuilds_a_torn_fts_index_and_reports_after(tmp_path: Path) -> None:
    """Reproducer: tail of the file truncated → `doctor --repair` said "fts repaired" but
    the check failed on every later run; FTS5's own 'rebuild' fixes it."""
    home = tmp_path / "s"
    _fill(home)
    _tear_tail_of_fts_page(home, "turns_tri")
    code, before = _doctor(home)
    assert code == 13 and not before["ok"] and "fts:turns_tri" in before["problems"]
    code, fixed = _doctor(home, "--repair")
    assert code == 0 and fixed["ok"], fixed
    assert "fts:turns_tri" in fixed["found"] and "fts:turns_tri" in fixed["repaired"]
    # The report shows the checks as they are after the repair.
    assert fixed["checks"]["fts_integrity"]["turns_tri"] is True
    assert fixed["checks"]["integrity"] == ["ok"] and fixed["problems"] == []
    code, later = _doctor(home)
    assert code == 0 and later["ok"] and later["problems"] == []
    with Memory.open(home, embedder=hashing()) as mem:
        hits = mem.read_context(query="whale-77", limit=5)["turns"]
        assert hits and hits[0]["text"] == "turn 77 mentions whale-77"


def test_repair_rebuilds_corrupted_fts_shadow_tables(tmp_path: Path) -> None:
    """A memory index whose segments were overwritten: deleting its rows fails, 'rebuild'
    does not; afterwards recall finds by words again."""
    home = tmp_path / "s"
    _fill(home)
    conn = sqlite3.connect(home / "tideline.db")
    conn.execute("UPDATE memories_fts_data SET block = zeroblob(length(block)) WHERE id > 10")
    conn.commit()
    conn.close()
    with Memory.open(home, embedder=hashing()) as mem:
        report = mem.doctor(repair=True)
        assert report["ok"], report
        assert report["found"] == ["fts:memories_fts"]
        assert mem.doctor()["ok"]
        assert mem.recall("kiln schedule K-017").items[0].text.startswith("note 17 ")


def test_what_cannot_be_rebuilt_is_reported_with_the_backups(tmp_path: Path) -> None:
    """An index FTS5 cannot rebuild or drop stays a problem, and the report says how to
    restore (never "repaired")."""
    home = tmp_path / "s"
    _fill(home)
    with Memory.open(home, embedder=hashing()) as mem:
        backup = mem.store.backup("manual")
    conn = sqlite3.connect(home / "tideline.db")
    conn.execute("UPDATE turns_tri_config SET v = 99 WHERE k = 'version'")
    conn.commit()
    conn.close()
    with Memory.open(home, embedder=hashing()) as mem:
        report = mem.doctor(repair=True)
    assert not report["ok"] and "fts:turns_tri" in report["problems"]
    assert any(r.startswith("fts:turns_tri:failed") for r in report["repaired"])
    assert backup.name in report["restore"]
