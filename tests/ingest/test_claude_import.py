"""Importing Claude Code transcripts: what is kept, ids, event times, scopes, idempotency."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.hooks.conftest import SESSION, line, write_transcript

from tideline import Memory
from tideline.errors import NotFound
from tideline.ingest.claude import find_transcripts, parse_transcript


def test_parse_keeps_text_and_skips_noise(tmp_path: Path) -> None:
    repo = tmp_path / "atlas"
    (repo / ".git").mkdir(parents=True)
    path = write_transcript(tmp_path / "p" / f"{SESSION}.jsonl", repo / "sub")
    parsed = parse_transcript(path)
    assert [t["id"] for t in parsed.turns] == ["u-1", "a-2", "a-4"]
    assert [t["role"] for t in parsed.turns] == ["user", "assistant", "assistant"]
    assert [t["turn_index"] for t in parsed.turns] == [0, 1, 2]
    assert {t["scope"] for t in parsed.turns} == {"atlas"}  # the git root of the cwd
    assert parsed.sessions == {SESSION}
    for reason in ("thinking", "tool_use", "tool_result", "command", "meta", "sidechain",
                   "synthetic", "malformed"):
        assert parsed.skipped[reason] >= 1, reason
    with_tools = parse_transcript(path, tool_results=True, scope="override")
    assert any(t["text"].startswith("[tool result] columns") for t in with_tools.turns)
    assert {t["scope"] for t in with_tools.turns} == {"override"}


def test_repairs_instead_of_failing(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rows = [line("user", "s-1", "bad \ud83d surrogate and \u0000 nul", ts="2026-01-01T00:00:00Z",
                 cwd=str(tmp_path)),
            line("user", "s-2", "x" * 200_000, ts="not a time", cwd=str(tmp_path))]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    parsed = parse_transcript(path)
    assert len(parsed.turns) == 2
    assert "\x00" not in parsed.turns[0]["text"]
    assert parsed.turns[1]["text"].endswith("…[truncated]")
    assert parsed.turns[1]["timestamp"] is None


def test_import_is_idempotent_with_original_times(mem: Memory, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "claude-config"
    repo = tmp_path / "atlas"
    (repo / ".git").mkdir(parents=True)
    write_transcript(config / "projects" / "-x-atlas" / f"{SESSION}.jsonl", repo)
    write_transcript(config / "projects" / "-x-atlas" / "second.jsonl", repo, session="s-2")
    (config / "projects" / "-x-atlas" / "link.jsonl").symlink_to(
        config / "projects" / "-x-atlas" / "second.jsonl")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    assert len(find_transcripts()) == 2  # the symlink is not followed
    seen: list[tuple[int, int]] = []
    res = mem.import_claude(progress=lambda done, total: seen.append((done, total)))
    assert res["files"] == 2 and res["sessions"] == 2
    # The second file repeats the first one's message uuids: stored once.
    assert res["inserted"] == 3 and res["skipped"] == 3
    assert seen and seen[-1] == (3, 3)
    again = mem.import_claude()
    assert again["inserted"] == 0 and again["skipped"] == 6
    turn = mem.read_context(session=SESSION, limit=5, scope="atlas")["turns"][0]
    assert turn["timestamp"].startswith("2026-11-20T09:00:01")
    assert turn["recorded_at"] > turn["timestamp"]  # recorded now, happened then
    packet = mem.recall("E1234 loader", scope="atlas", limit=3)
    assert any(i.type == "turn" and i.message_id == "u-1" for i in packet.items)
    with pytest.raises(NotFound):
        mem.import_claude([tmp_path / "nope"])


def test_cli_import_claude(tmp_path: Path) -> None:
    repo = tmp_path / "atlas"
    (repo / ".git").mkdir(parents=True)
    path = write_transcript(tmp_path / "t" / "x.jsonl", repo)
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing")
    cmd = [sys.executable, "-m", "tideline", "import", "claude", str(path), "--store",
           str(tmp_path / "s")]
    first = subprocess.run([*cmd, "--json"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    assert data["inserted"] == 3 and data["dropped"]["tool_use"] == 1
    human = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert human.returncode == 0 and "imported 0 turn(s)" in human.stdout
    assert "already stored" in human.stdout
    missing = subprocess.run([sys.executable, "-m", "tideline", "import", "claude",
                              str(tmp_path / "none.jsonl"), "--store", str(tmp_path / "s")],
                             env=env, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 5 and "not_found" in missing.stderr


def test_import_jsonl_verb(mem: Memory, tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(json.dumps(r) for r in [
        {"session": "s1", "role": "user", "text": "hello", "id": "m1",
         "timestamp": "2026-01-02T03:04:05Z"},
        {"session": "s1", "role": "assistant", "text": "hi", "id": "m2"}]) + "\n")
    assert mem.import_jsonl(chat)["inserted"] == 2
    assert mem.import_jsonl(chat)["inserted"] == 0


def _transcripts(root: Path, cwd: Path, files: int, turns: int) -> list[str]:
    """``files`` transcripts of ``turns`` prompts each, every message id distinct."""
    ids: list[str] = []
    for f in range(files):
        rows = []
        for n in range(turns):
            uuid = f"f{f}-u{n}"
            ids.append(uuid)
            rows.append(line("user", uuid, f"file {f} prompt {n} about the parser",
                             ts=f"2026-11-20T09:{f:02d}:{n:02d}Z", cwd=str(cwd),
                             session=f"s-{f}"))
        path = root / f"t{f}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return ids


def test_import_stores_each_transcript_before_reading_the_next(
        mem: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory holds one transcript's turns, not every file's: the old importer parsed
    all files first and stored nothing until the last one was read."""
    import tideline.ingest.claude as claude

    ids = _transcripts(tmp_path / "p", tmp_path, files=3, turns=4)
    stored_at_parse: list[int] = []
    real_parse = claude.parse_transcript

    def watched(path: str | Path, **kw: Any) -> claude.ClaudeTranscript:
        stored_at_parse.append(len(mem.store.agent.existing_message_ids(
            claude.SOURCE, [("atlas", i) for i in ids])))
        return real_parse(path, **kw)

    monkeypatch.setattr(claude, "parse_transcript", watched)
    res = mem.import_claude([tmp_path / "p"], scope="atlas")
    assert res["inserted"] == 12 and res["files"] == 3 and res["sessions"] == 3
    assert stored_at_parse == [0, 4, 8]


def test_import_progress_counts_the_turns_to_store_across_files(
        mem: Memory, tmp_path: Path) -> None:
    ids = _transcripts(tmp_path / "p", tmp_path, files=3, turns=4)
    first = mem.import_claude([tmp_path / "p" / "t0.jsonl"], scope="atlas")
    assert first["inserted"] == 4
    seen: list[tuple[int, int]] = []
    res = mem.import_claude([tmp_path / "p"], scope="atlas",
                            progress=lambda done, total: seen.append((done, total)))
    assert res["inserted"] == 8 and res["skipped"] == 4 and res["turns"] == len(ids)
    assert seen[-1] == (8, 8)
    assert all(total == 8 and 0 <= done <= total for done, total in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
