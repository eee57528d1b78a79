"""Importing Hermes Agent sessions from a real state.db written by hermes-agent itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tideline import Memory
from tideline.errors import NotFound, StoreCorrupt


@pytest.fixture
def hermes_db(tmp_path: Path) -> Path:
    from hermes_state import SessionDB

    repo = tmp_path / "orchard"
    (repo / ".git").mkdir(parents=True)
    path = tmp_path / "hermes" / "state.db"
    path.parent.mkdir()
    db = SessionDB(path)
    t0 = time.time() - 86_400
    db.create_session("sess-1", "cli", cwd=str(repo))
    db.append_message("sess-1", "system", "You are Hermes.", timestamp=t0)
    db.append_message("sess-1", "user", "How do orchard exports run?", timestamp=t0 + 1)
    db.append_message("sess-1", "assistant", None, tool_calls=[{"id": "c1", "type": "function",
                      "function": {"name": "terminal", "arguments": "{}"}}], timestamp=t0 + 2)
    db.append_message("sess-1", "tool", "cron: 0 2 * * *", tool_name="terminal",
                      tool_call_id="c1", timestamp=t0 + 3)
    db.append_message("sess-1", "assistant", "A nightly cron job at 02:00 exports them.",
                      timestamp=t0 + 4)
    db.create_session("sess-2", "telegram")
    db.append_message("sess-2", "user", "remind me about the dentist", timestamp=t0 + 10)
    db.close()
    return path


def test_import_state_db(mem: Memory, hermes_db: Path) -> None:
    res = mem.import_hermes([hermes_db])
    assert res["sessions"] == 2 and res["inserted"] == 3
    assert res["dropped"]["system"] == 1 and res["dropped"]["tool_result"] == 1
    assert res["dropped"]["empty"] == 1
    turns = mem.read_context(session="sess-1", limit=10, scope="orchard")["turns"]
    assert [t["text"] for t in turns] == ["How do orchard exports run?",
                                          "A nightly cron job at 02:00 exports them."]
    assert {t["scope"] for t in turns} == {"orchard"}
    assert all(t["message_id"].startswith("sess-1:") for t in turns)
    assert mem.read_context(session="sess-2")["turns"][0]["scope"] == "global"
    assert mem.import_hermes([hermes_db])["inserted"] == 0
    only = mem.import_hermes([hermes_db.parent], session="sess-2", tool_results=True)
    assert only["sessions"] == 1 and only["inserted"] == 0


def test_import_export_jsonl_from_the_hermes_cli(mem: Memory, hermes_db: Path,
                                                 tmp_path: Path) -> None:
    hermes = Path(sys.executable).parent / "hermes"
    out = tmp_path / "export.jsonl"
    env = dict(os.environ, HERMES_HOME=str(hermes_db.parent))
    proc = subprocess.run([str(hermes), "sessions", "export", str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and out.exists(), proc.stdout + proc.stderr
    assert len(out.read_text().splitlines()) == 2
    res = mem.import_hermes([out], tool_results=True)
    assert res["inserted"] == 4 and res["sessions"] == 2
    # The same messages from the database are recognised by id.
    assert mem.import_hermes([hermes_db], tool_results=True)["inserted"] == 0


def test_bad_inputs(mem: Memory, tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        mem.import_hermes([tmp_path / "missing"])
    other = tmp_path / "other.db"
    other.write_bytes(b"")
    import sqlite3

    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(StoreCorrupt):
        mem.import_hermes([other])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x"}) + "\n")
    from tideline.errors import InvalidInput

    with pytest.raises(InvalidInput):
        mem.import_hermes([bad])
