"""Schema 4 on a store written before it: position-derived turn ids and doubled indexes.

The old code gave an id-less turn ``auto-`` + sha256(session, index, text)[:24] and read
the index outside the write transaction; a store it wrote is rebuilt here on a real
SQLite file (the shape schema 3 had), then opened by today's code.

SQLite only (tests/backend.py): PostgreSQL stores begin at a later schema.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from tests.backend import schema_version
from tests.conftest import hashing

from tideline import Memory
from tideline.store.sqlite import schema

CHAT = [{"session": "s1", "role": "user", "text": "the loader died with E1234"},
        {"session": "s1", "role": "assistant", "text": "ok"},
        {"session": "s1", "role": "assistant", "text": "ok"}]


def _legacy(session: str, index: int, text: str) -> str:
    return "auto-" + hashlib.sha256(f"{session}\x1f{index}\x1f{text}".encode()).hexdigest()[:24]


def _old_store(home: Path) -> None:
    """The file imported twice by the old code (6 turns), plus a doubled index from a
    concurrent import and a source id that merely starts with ``auto-``."""
    with Memory.open(home, embedder=hashing()) as mem:
        for copy in range(2):
            mem.add_turns([t | {"id": _legacy("s1", 3 * copy + i, t["text"])}
                           for i, t in enumerate(CHAT)], source="jsonl")
        mem.add_turns([{"session": "s2", "text": "first", "id": "auto-mine"},
                       {"session": "s2", "text": "second"}], source="jsonl")
    with sqlite3.connect(home / "tideline.db") as db:
        db.execute("DROP INDEX turns_place")
        db.execute("CREATE INDEX turns_session ON turns(namespace, session, turn_index)")
        db.execute("UPDATE turns SET turn_index = 0, message_id = ? WHERE text = 'second'",
                   (_legacy("s2", 0, "second"),))
        db.execute("UPDATE db_meta SET value = '3' WHERE key = 'schema_version'")


def test_old_ids_are_rewritten_so_a_reimport_adds_nothing(tmp_path: Path) -> None:
    """Issue 9, item 2 on an existing store: re-importing a file the old code stored (twice)
    adds no third copy; the migration took a backup first."""
    home = tmp_path / "store"
    _old_store(home)
    file = tmp_path / "chat.jsonl"
    file.write_text("".join(json.dumps(t) + "\n" for t in CHAT), "utf-8")
    with Memory.open(home, embedder=hashing()) as mem:
        assert schema_version(mem) == schema.SCHEMA_VERSION
        assert mem.import_jsonl(file)["inserted"] == 0
        assert mem.introspect()["turns"] == 8
        s1 = mem.store.session_turns("s1")
        assert [t.turn_index for t in s1] == list(range(6))
        assert [t.text for t in s1] == [t["text"] for t in CHAT] * 2  # copies stay, in order
        assert all(t.message_id.startswith("auto-") and len(t.message_id) == 37 for t in s1)
        s2 = mem.store.session_turns("s2")
        assert [(t.turn_index, t.text) for t in s2] == [(0, "first"), (1, "second")]
        assert s2[0].message_id == "auto-mine"  # a source's own id is kept
        assert mem.add_turns([{"session": "s2", "text": "second"}], source="jsonl").inserted == 0
        assert mem.doctor()["ok"]
    backups = sorted((home / "backups").glob("pre-migrate-v3-*.db"))
    assert len(backups) == 1
    with sqlite3.connect(backups[0]) as old:
        ids = {r[0] for r in old.execute("SELECT message_id FROM turns WHERE session = 's1'")}
    assert ids == {_legacy("s1", i, CHAT[i % 3]["text"]) for i in range(6)}


def test_the_migration_leaves_one_place_per_turn(tmp_path: Path) -> None:
    home = tmp_path / "store"
    _old_store(home)
    Memory.open(home, embedder=hashing()).close()
    with sqlite3.connect(home / "tideline.db") as db:
        dup = db.execute("SELECT count(*) FROM (SELECT 1 FROM turns GROUP BY namespace, "
                         "session, turn_index HAVING count(*) > 1)").fetchone()[0]
        unique = db.execute("SELECT \"unique\" FROM pragma_index_list('turns') "
                            "WHERE name = 'turns_place'").fetchone()
    assert dup == 0 and unique == (1,)
