"""A store written before sleep existed (schema v2) migrates to v3 and sleeps.

SQLite only (tests/backend.py): a v2 store exists only as an SQLite file.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from tests.backend import migrated_from, rows, schema_version
from tests.conftest import hashing

from tideline import Memory
from tideline.store.sqlite import schema


def make_v2_store(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "backups").mkdir()
    db = sqlite3.connect(home / "tideline.db", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    for migration in schema.MIGRATIONS[:2]:
        migration(db)
    db.execute("INSERT INTO db_meta VALUES ('schema_version', '2')")
    db.execute("INSERT INTO db_meta VALUES ('embedder', ?)", (hashing().marker,))
    now = time.time()
    db.execute(
        "INSERT INTO memories(namespace, scope, kind, gesture, tags, weight, stability, "
        "last_access, recorded_at, updated_at) VALUES ('default', 'global', 'fact', "
        "'written before sleep existed', ?, 0.25, 7.0, ?, ?, ?)",
        (json.dumps(["legacy"]), now, now, now))
    db.execute("INSERT INTO eligibility(namespace, recall_id, memory_id, rank, score, ts) "
               "VALUES ('default', 1, 1, 0, 0.9, ?)", (now,))
    db.close()


def test_v2_store_migrates_keeps_data_and_sleeps(tmp_path: Path) -> None:
    home = tmp_path / "store"
    make_v2_store(home)
    with Memory.open(home, embedder=hashing()) as mem:
        assert schema_version(mem) == schema.SCHEMA_VERSION >= 3
        assert migrated_from(mem) == 2
        assert list((home / "backups").glob("pre-migrate-v2-*.db"))
        assert mem.get(1).gesture == "written before sleep existed"
        tables = {r[0] for r in rows(mem, "SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"sleep_state", "topic_clusters", "topic_members", "emb_clusters", "emb_members",
                "emb_adjacency", "entity_nodes", "entity_edges", "retention_snapshots",
                "memory_keywords"} <= tables
        res = mem.sleep()
        assert res["errors"] == {} and res["memories"] == {"before": 1, "after": 1}
    with Memory.open(home, embedder=hashing()) as mem:
        assert migrated_from(mem) is None
        assert mem.sleep()["skipped"] is True
