"""Importing Hermes Agent sessions from a real state.db written by hermes-agent itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tideline import Memory
from tideline.errors import InvalidInput, NotFound, StoreCorrupt


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
    with pytest.raises(InvalidInput):
        mem.import_hermes([bad])


# A fake GitHub token: stored redacted, so its raw text never matches the stored one.
TOKEN = "ghp_" + "A1b2C3d4E5" * 3 + "F6g7H8"
CAFE = "cafe\u0301 au lait, bitte"  # NFD, as macOS keyboards type it; stored as NFC


def _provider(store: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from tideline.plugins.hermes import TidelineMemoryProvider

    monkeypatch.setenv("TIDELINE_PROJECT", "global")  # not this checkout's directory name

    provider = TidelineMemoryProvider(store=store, embedder="hashing")
    provider.initialize("sess-9")
    return provider


def _state_db(path: Path, texts: list[tuple[str, str]]) -> Path:
    from hermes_state import SessionDB

    db = SessionDB(path)
    db.create_session("sess-9", "cli")
    for n, (role, text) in enumerate(texts):
        db.append_message("sess-9", role, text, timestamp=time.time() - 100 + n)
    db.close()
    return path


def test_live_captured_turns_with_a_secret_or_nfd_text_are_not_imported_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 11 (one fingerprint dedup): the import compared raw text with the stored,
    redacted and NFC-normalised text, so these two turns were stored a second time."""
    texts = [("user", f"my token is {TOKEN} and I want {CAFE}"), ("assistant", "Noted.\n")]
    provider = _provider(tmp_path / "store", monkeypatch)
    provider.sync_turn(texts[0][1], texts[1][1], session_id="sess-9")
    provider.shutdown()
    db = _state_db(tmp_path / "state.db", texts + [("user", "and a croissant")])
    with Memory.open(tmp_path / "store", embedder="hashing", project="global") as mem:
        res = mem.import_hermes([db], scope="global")
        assert (res["captured_live"], res["inserted"]) == (2, 1)
        turns = mem.read_context(session="sess-9", limit=10, scope="global")["turns"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert TOKEN not in turns[0]["text"]


def test_the_plugin_does_not_capture_again_what_an_import_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 11 (one fingerprint dedup): the plugin stripped but did not normalise."""
    texts = [("user", f"{CAFE} with {TOKEN}"), ("assistant", "Coming up.")]
    db = _state_db(tmp_path / "state.db", texts)
    with Memory.open(tmp_path / "store", embedder="hashing", project="global") as mem:
        assert mem.import_hermes([db], scope="global")["inserted"] == 2
    provider = _provider(tmp_path / "store", monkeypatch)
    provider.on_session_end([{"role": r, "content": t} for r, t in texts]
                            + [{"role": "user", "content": "Thanks!"}])
    provider.shutdown()
    with Memory.open(tmp_path / "store", embedder="hashing", project="global") as mem:
        turns = mem.read_context(session="sess-9", limit=10, scope="global")["turns"]
    assert len(turns) == 3 and turns[-1]["text"] == "Thanks!"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.sampled_from(["user", "assistant"]))
def test_a_stored_text_is_always_recognised(text: str, role: str) -> None:
    """Whatever the text, the form storage keeps is what the dedup compares with."""
    from tideline.ingest.hermes import unseen_turns
    from tideline.write.validate import clean_text

    try:
        stored = clean_text(text, "text", 10_000, required=True)
    except InvalidInput:
        return  # storage refuses it: there is nothing stored to recognise
    turn = {"session": "s", "role": role, "text": text}
    asked: list[str] = []

    def prints(session: str) -> set[tuple[str, str]]:
        asked.append(session)
        return {(role, stored)}

    assert unseen_turns([turn, dict(turn)], prints) == ([], 2)
    assert asked == ["s"]
    other = {"session": "s", "role": role, "text": stored + " (again)"}
    assert unseen_turns([other, other], prints) == ([other, other], 0)


def test_import_stores_each_session_before_reading_the_next(
        mem: Memory, hermes_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Hermes history is imported a session at a time: the old importer read every
    session's messages into memory before storing any."""
    import tideline.ingest.hermes as hermes

    stored_at_parse: list[int] = []
    real = hermes.hermes_turns

    def watched(sessions: Any, **kw: Any) -> hermes.HermesSessions:
        stored_at_parse.append(mem.introspect()["turns"])
        return real(sessions, **kw)

    monkeypatch.setattr(hermes, "hermes_turns", watched)
    res = mem.import_hermes([hermes_db])
    assert res["inserted"] == 3 and res["sessions"] == 2
    assert len(stored_at_parse) == 2 and stored_at_parse[0] == 0 and stored_at_parse[1] > 0


def test_import_progress_counts_the_turns_to_store(mem: Memory, hermes_db: Path) -> None:
    seen: list[tuple[int, int]] = []
    res = mem.import_hermes([hermes_db], progress=lambda d, t: seen.append((d, t)))
    assert res["inserted"] == 3 and seen[-1] == (3, 3)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert all(t == 3 for _, t in seen)
    again: list[tuple[int, int]] = []
    assert mem.import_hermes([hermes_db], progress=lambda d, t: again.append((d, t)))[
        "skipped"] == 3
    assert again[-1] == (0, 0)
