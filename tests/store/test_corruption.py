"""A lost, empty or foreign database is refused, never silently replaced (issue 9 item 6).

Real files throughout: the store is written, its database truncated or deleted with
the file system, and every surface (API, CLI, hook) opened on it as a user would.

SQLite only (tests/backend.py): the damage is done to the database file itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import hashing
from tests.hooks.conftest import run_hook_process

from tideline import Memory, NotFound, StoreCorrupt
from tideline.store.sqlite.presence import MARKER


def _store_with_backup(home: Path) -> Path:
    with Memory.open(home, embedder=hashing()) as mem:
        mem.remember("the lighthouse keeper logs the weather at dawn")
        backup = mem.store.backup("manual")
        mem.remember("a second fact after the backup")
    return backup


def _cli(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing")
    return subprocess.run([sys.executable, "-m", "tideline", *args, "--store", str(store)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


def test_zero_byte_database_raises_store_corrupt_naming_the_backups(tmp_path: Path) -> None:
    """Reproducer: `truncate -s0 tideline.db; tideline introspect` → 0 memories, doctor ok."""
    home = tmp_path / "s"
    backup = _store_with_backup(home)
    os.truncate(home / "tideline.db", 0)
    with pytest.raises(StoreCorrupt) as err:
        Memory.open(home, embedder=hashing())
    assert "empty (0 bytes)" in str(err.value) and backup.name in str(err.value)
    assert (home / "tideline.db").stat().st_size == 0  # not replaced by an empty store
    cli = _cli("introspect", "--json", store=home)
    assert cli.returncode == 13 and "store_corrupt" in cli.stderr and backup.name in cli.stderr
    assert _cli("doctor", store=home).returncode == 13
    # The named backup restores the store.
    shutil.copyfile(backup, home / "tideline.db")
    with Memory.open(home, embedder=hashing()) as mem:
        assert mem.introspect()["memories"] == 1


@pytest.mark.parametrize("evidence", ["marker", "backups", "index"])
def test_missing_database_where_a_store_lived(tmp_path: Path, evidence: str) -> None:
    """A deleted database is StoreCorrupt when the marker, backups or index files remain."""
    home = tmp_path / "s"
    _store_with_backup(home)
    (home / "tideline.db").unlink()
    if evidence != "marker":
        (home / MARKER).unlink()
    if evidence != "backups":
        shutil.rmtree(home / "backups")
    if evidence == "index":
        # A store this small searches exactly and saves no index file; a large one does.
        (home / "index" / "m-default-global-1.usearch").write_bytes(b"\0" * 64)
    else:
        shutil.rmtree(home / "index")
    with pytest.raises(StoreCorrupt, match="is missing"):
        Memory.open(home, embedder=hashing())
    assert not (home / "tideline.db").exists()


def test_a_new_store_only_in_a_new_or_empty_directory(tmp_path: Path) -> None:
    """Creation is implicit only where nothing else lives (the identity file may be there)."""
    Memory.open(tmp_path / "new" / "deep", embedder=hashing()).close()
    (tmp_path / "empty").mkdir()
    Memory.open(tmp_path / "empty", embedder=hashing()).close()
    (tmp_path / "soul").mkdir()
    (tmp_path / "soul" / "SOUL.md").write_text("I am the agent.\n", encoding="utf-8")
    with Memory.open(tmp_path / "soul", embedder=hashing()) as mem:
        assert mem.identity() is not None
    for name in ("new/deep", "empty", "soul"):
        assert (tmp_path / name / MARKER).is_file()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(NotFound, match="notes.txt"):
        Memory.open(busy, embedder=hashing())
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]  # nothing created
    cli = _cli("init", store=busy)
    assert cli.returncode == 5 and "new or empty directory" in cli.stderr


def test_a_store_from_before_the_marker_opens_and_gets_one(tmp_path: Path) -> None:
    home = tmp_path / "s"
    _store_with_backup(home)
    (home / MARKER).unlink()
    with Memory.open(home, embedder=hashing()) as mem:
        assert mem.introspect()["memories"] == 2
    assert json.loads((home / MARKER).read_text())["format"] == "tideline-store"


def test_foreign_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    """Reproducer: a foreign SQLite file gave "table memories already exists" and was left
    switched to WAL."""
    home = tmp_path / "s"
    home.mkdir()
    db = home / "tideline.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("CREATE TABLE memories (x)")
    conn.execute("INSERT INTO users(name) VALUES ('ada')")
    conn.commit()
    before_mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    with pytest.raises(StoreCorrupt, match="something else") as err:
        Memory.open(home, embedder=hashing())
    assert "users" in str(err.value)
    cli = _cli("introspect", store=home)
    assert cli.returncode == 13 and "users" in cli.stderr
    conn = sqlite3.connect(db)
    after_mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    tables = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master"))
    conn.close()
    assert before_mode == after_mode == "delete"
    assert tables == ["memories", "users"]
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in home.iterdir()) == ["tideline.db"]  # nothing added beside


def test_hooks_stay_fail_safe_on_a_lost_database(tmp_path: Path) -> None:
    """A hook on a truncated store injects nothing, exits 0, says why, and recreates nothing."""
    home = tmp_path / "s"
    backup = _store_with_backup(home)
    os.truncate(home / "tideline.db", 0)
    repo = tmp_path / "atlas"
    (repo / ".git").mkdir(parents=True)
    payload = {"session_id": "s1", "transcript_path": str(repo / "t.jsonl"), "cwd": str(repo),
               "hook_event_name": "SessionStart", "source": "startup"}
    proc = run_hook_process("session-start", payload, home, cwd=repo)
    assert proc.returncode == 0 and proc.stdout == ""
    assert "store_corrupt" in proc.stderr and backup.name in proc.stderr
    assert (home / "tideline.db").stat().st_size == 0
