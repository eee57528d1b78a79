"""Backup retention is bounded by count and by total size (issue 9 item 11).

Reproducer: ten full copies were kept with no size bound (507 MB of backups for a
53 MB store). Real stores, real sleeps, real files on disk.

SQLite only (tests/backend.py): backups are copies of the SQLite file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.conftest import hashing

from tideline import Config, InvalidInput, Memory

MIB = 1024 * 1024


def _fill(mem: Memory, n: int) -> None:
    for i in range(n):
        mem.remember(f"fact {i}: the kiln at site {i * 37 % 101} fires at {i % 24}:00 "
                     + "with notes " * 20)


def _backups(home: Path) -> list[Path]:
    return sorted((home / "backups").glob("*.db"))


def test_sleep_keeps_backups_within_count_and_total_size(tmp_path: Path) -> None:
    home = tmp_path / "s"
    with Memory.open(home, embedder=hashing()) as mem:
        _fill(mem, 120)
        old = mem.store.backup("manual")  # every kind of backup counts
    size = old.stat().st_size
    assert size > MIB // 4
    budget_mb = max(1, (3 * size) // MIB)  # room for about three copies
    cfg = Config.load(home=home, backups_keep=4, backups_max_mb=budget_mb)
    with Memory.open(config=cfg, embedder=hashing()) as mem:
        made = []
        for i in range(6):
            mem.remember(f"sleep round {i} adds a fact")
            made.append(Path(mem.sleep(force=True)["backup"]))
            kept = _backups(home)
            assert 1 <= len(kept) <= 4
            assert sum(p.stat().st_size for p in kept) <= budget_mb * MIB
            assert made[-1] in kept  # the newest always stays
    assert not old.exists()  # the oldest went first
    kept = _backups(home)
    assert kept == sorted(made[-len(kept):])  # newest ones kept, in order


def test_count_bound_alone_and_a_large_newest_backup_stays(tmp_path: Path) -> None:
    home = tmp_path / "s"
    with Memory.open(home, embedder=hashing()) as mem:
        _fill(mem, 40)
        for _ in range(4):
            mem.store.backup("sleep", keep=2, max_bytes=0)
        assert len(_backups(home)) == 2
        newest = mem.store.backup("sleep", keep=5, max_bytes=1)  # smaller than any copy
    assert _backups(home) == [newest]


def test_backup_bounds_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (Config.load().backups_keep, Config.load().backups_max_mb) == (5, 512)
    monkeypatch.setenv("TIDELINE_BACKUPS_KEEP", "3")
    monkeypatch.setenv("TIDELINE_BACKUPS_MAX_MB", "64")
    cfg = Config.load()
    assert (cfg.backups_keep, cfg.backups_max_mb) == (3, 64)
    for bad in ("-1", "lots"):
        monkeypatch.setenv("TIDELINE_BACKUPS_MAX_MB", bad)
        with pytest.raises(InvalidInput, match="TIDELINE_BACKUPS_MAX_MB|backups_max_mb"):
            Config.load()
    monkeypatch.delenv("TIDELINE_BACKUPS_MAX_MB")
    with pytest.raises(InvalidInput):
        Config.load(backups_keep=-2)
    assert os.environ["TIDELINE_BACKUPS_KEEP"] == "3"


def _full_disk_on_backup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backups fail with SQLite's own "database or disk is full" after the copy's rollback
    journal exists (a page limit on the copy, its journal kept as a full disk keeps it):
    what the probe of issue 33 item 12 saw on a real full disk."""
    import sqlite3

    import tideline.store.sqlite.connection as connection

    real = sqlite3.connect

    def connect(target: object, *args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real(target, *args, **kwargs)  # type: ignore[call-overload]
        if str(target).endswith(".partial"):
            conn.execute("PRAGMA journal_mode=PERSIST")
            conn.execute("CREATE TABLE filler (x)")
            conn.commit()
            conn.execute("PRAGMA max_page_count=4")
        return conn

    monkeypatch.setattr(connection.sqlite3, "connect", connect)


def test_failed_sleep_backup_leaves_no_partial_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33 item 12: a sleep backup that failed on a full disk left
    ``backups/sleep-….partial-journal`` behind; now the copy and its journal go."""
    from tideline.errors import StoreFull

    home = tmp_path / "s"
    with Memory.open(home, embedder=hashing()) as mem:
        _fill(mem, 60)
        before = sorted((home / "backups").glob("*")) if (home / "backups").exists() else []
        with monkeypatch.context() as m:
            _full_disk_on_backup(m)
            with pytest.raises(StoreFull):
                mem.sleep(force=True)
        left = sorted(p for p in (home / "backups").iterdir() if p not in before)
        assert left == [], left
        assert mem.sleep(force=True)["backup"]  # the next sleep backs up as usual
    assert len(_backups(home)) == 1


def test_leftover_partial_files_are_no_backups_and_are_cleared(tmp_path: Path) -> None:
    """What a killed backup left (before this fix, or a kill -9 mid-copy) is never listed
    or counted as a backup, and the next backup removes it once it is stale; a fresh one
    (another process's backup in progress) stays."""
    from tideline.store.sqlite.presence import restore_hint

    home = tmp_path / "s"
    with Memory.open(home, embedder=hashing()) as mem:
        _fill(mem, 10)
        folder = home / "backups"
        folder.mkdir(exist_ok=True)
        stale = [folder / "sleep-20260101T000000-1.partial",
                 folder / "sleep-20260101T000000-1.partial-journal"]
        fresh = folder / "sleep-20260101T000000-2.partial"
        for p in [*stale, fresh]:
            p.write_bytes(b"\0" * 4096)
        old = os.stat(stale[0]).st_mtime - 2 * 3600  # well past the 15 minutes
        for p in stale:
            os.utime(p, (old, old))
        assert "No backups" in restore_hint(home, "tideline.db")
        made = mem.store.backup("sleep", keep=1, max_bytes=0)
    assert _backups(home) == [made]
    assert not any(p.exists() for p in stale)
    assert fresh.exists()
    assert made.name in restore_hint(home, "tideline.db") and ".partial" not in restore_hint(
        home, "tideline.db")
