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
