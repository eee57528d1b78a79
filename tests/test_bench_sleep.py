"""The sleep bench: ``--keep`` reuses the loaded store (each run sleeps on a fresh copy),
``--kept`` takes the recall bench's stores, and every step reports its CPU seconds."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tideline.bench.sleep import run
from tideline.errors import InvalidInput


def _count(db: Path, sql: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql).fetchone()[0])


def test_a_kept_store_is_loaded_once_and_never_slept_on(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    first = run(60, 10, 3, process_runs=1, keep=keep)
    second = run(60, 10, 3, process_runs=1, keep=keep)
    assert first["load"]["reused"] is False and second["load"]["reused"] is True
    assert first["load"]["load_memories_s"] == second["load"]["load_memories_s"]
    kept_db = next(keep.glob("sleep-sqlite-60-10-3-7/store/*.db"))
    assert _count(kept_db, "SELECT count(*) FROM memories") == 60
    assert _count(kept_db, "SELECT count(*) FROM emb_clusters") == 0  # slept on copies only
    assert first["full"]["clusters"] == second["full"]["clusters"] > 0
    cpu = second["full"]["steps_cpu_s"]
    assert set(cpu) == set(second["full"]["steps_ms"])
    assert all(v["client"] >= 0 and v["server"] == 0 for v in cpu.values())


def test_kept_needs_a_store_the_recall_bench_kept(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="bench recall --keep"):
        run(60, 10, 3, process_runs=1, kept=tmp_path)
    with pytest.raises(InvalidInput, match="--database"):
        run(60, 10, 3, process_runs=1, keep=tmp_path, database="postgresql://x/y")
