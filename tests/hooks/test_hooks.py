"""Claude Code hook payloads for every event, as whole processes and in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import hashing
from tests.hooks.conftest import SESSION, run_hook_process, write_transcript

from tideline import Memory
from tideline.config import Config
from tideline.hooks.claude import EVENTS, run_hook


def journal(store: Path, kinds: list[str] | None = None) -> list[dict]:
    m = Memory.open(store, embedder=hashing())
    try:
        return m.events(kinds=kinds, limit=200, all_scopes=True)
    finally:
        m.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    repo = tmp_path / "atlas"
    (repo / ".git").mkdir(parents=True)
    return repo


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    m = Memory.open(store, embedder=hashing(), project="atlas")
    m.write("We fixed loader error E1234 by mapping the region column in schema.yaml",
            scope="atlas", importance=5, emotional=4, recurrence=4, unresolved=2,
            tags=["loader"])
    m.remember("the user prefers terse answers", scope="global", kind="preference")
    m.close()
    return store


def payload(event: str, project: Path, **extra: object) -> dict:
    return {"session_id": SESSION, "transcript_path": str(project / "t.jsonl"),
            "cwd": str(project), "permission_mode": "default",
            "hook_event_name": EVENTS[event], **extra}


def test_session_start_injects_the_brief_without_numpy(seeded: Path, project: Path) -> None:
    proc = run_hook_process("session-start", payload("session-start", project, source="startup"),
                            seeded, cwd=project, probe=True)
    assert proc.returncode == 0
    assert "HEAVY=\n" in proc.stderr or proc.stderr.strip().endswith("HEAVY=")
    out = json.loads(proc.stdout)
    ctx = out["hookSpecificOutput"]
    assert ctx["hookEventName"] == "SessionStart"
    assert "E1234" in ctx["additionalContext"]
    assert ctx["additionalContext"].startswith("<tideline-recalled-data")
    assert "project atlas (detected by git_root)" in ctx["additionalContext"]
    inject = journal(seeded, ["inject"])[0]["data"]
    assert inject["kind"] == "brief" and inject["source"] == "startup"
    assert set(inject["tier_tokens"]) == {"T0", "T2", "T2b", "T3"}


def test_prompt_injects_prefetch_and_logs_t1(seeded: Path, project: Path) -> None:
    proc = run_hook_process("prompt", payload("prompt", project,
                                              prompt="why did the loader fail with E1234?"),
                            seeded, cwd=project)
    assert proc.returncode == 0, proc.stderr
    ctx = json.loads(proc.stdout)["hookSpecificOutput"]
    assert ctx["hookEventName"] == "UserPromptSubmit"
    assert "region column" in ctx["additionalContext"]
    tiers = [e["data"]["tier"] for e in journal(seeded, ["recall"])]
    assert "T1" in tiers
    empty = run_hook_process("prompt", payload("prompt", project, prompt="   "), seeded,
                             cwd=project)
    assert empty.returncode == 0 and empty.stdout == "" and empty.stderr == ""


def test_stop_records_turns_then_is_cheap(seeded: Path, project: Path) -> None:
    write_transcript(project / "t.jsonl", project)
    first = run_hook_process("stop", payload("stop", project, stop_hook_active=False), seeded,
                             cwd=project)
    assert first.returncode == 0 and first.stdout == "", first.stderr
    m = Memory.open(seeded, embedder=hashing())
    try:
        kept = m.read_context(session=SESSION, limit=50, scope="atlas")["turns"]
    finally:
        m.close()
    texts = [t["text"] for t in kept]
    assert texts[0].startswith("The loader fails with error E1234")
    assert any("region" in t for t in texts) and "Let me look at schema.yaml." in texts
    assert not any("command-name" in t or "side task" in t or "Not logged in" in t
                   or "columns: [id, name]" in t for t in texts)
    assert {t["message_id"] for t in kept} == {"u-1", "a-2", "a-4"}
    assert {t["scope"] for t in kept} == {"atlas"}
    assert kept[0]["timestamp"].startswith("2026-11-20T09:00:01")
    hook = journal(seeded, ["hook"])[0]["data"]
    assert hook["captured"]["inserted"] == 3 and hook["sleep"] is not None
    # Nothing new since: the second stop neither embeds nor imports numpy.
    again = run_hook_process("stop", payload("stop", project, stop_hook_active=False), seeded,
                             cwd=project, probe=True)
    assert again.returncode == 0 and again.stderr.strip().endswith("HEAVY=")
    hook = journal(seeded, ["hook"])[0]["data"]
    assert hook["captured"] == {"transcript": str(project / "t.jsonl"), "turns": 3, "new": 0,
                                "inserted": 0}
    assert hook["sleep"] is None


@pytest.mark.parametrize("event", ["pre-compact", "session-end"])
def test_capture_whole_transcript_idempotently(tmp_path: Path, project: Path, event: str) -> None:
    store = tmp_path / "s"
    write_transcript(project / "t.jsonl", project, extra_turns=5)
    extra = {"trigger": "auto", "custom_instructions": ""} if event == "pre-compact" else {
        "reason": "prompt_input_exit"}
    for _ in range(2):
        proc = run_hook_process(event, payload(event, project, **extra), store, cwd=project)
        assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    hooks = [e["data"] for e in journal(store, ["hook"])]
    assert [h["captured"]["inserted"] for h in hooks] == [0, 8]
    assert hooks[0].get("trigger" if event == "pre-compact" else "reason")


def test_missing_transcript_is_not_an_error(tmp_path: Path, project: Path) -> None:
    proc = run_hook_process("session-end", payload("session-end", project, reason="clear"),
                            tmp_path / "s", cwd=project)
    assert proc.returncode == 0 and proc.stderr == ""
    assert journal(tmp_path / "s", ["hook"])[0]["data"]["captured"]["transcript"] is None


MALFORMED = [("", "empty hook payload"), ("{not json", "not JSON"),
             ("[1, 2]", "must be a JSON object")]
SPECIFIC = [
    ("session-start", {"hook_event_name": "Stop", "session_id": "x"}, "received a Stop payload"),
    ("prompt", {"hook_event_name": "UserPromptSubmit", "prompt": "x\u0000y"}, "NUL"),
    ("pre-compact", {"hook_event_name": "PreCompact", "transcript_path": "/etc/passwd"},
     "not a .jsonl file"),
    ("stop", {"hook_event_name": "Stop", "transcript_path": 42}, None),  # no transcript: fine
]


@pytest.mark.parametrize(("event", "raw", "fragment"),
                         [(e, raw, frag) for e in EVENTS for raw, frag in MALFORMED]
                         + [(e, json.dumps(p), frag) for e, p, frag in SPECIFIC])
def test_malformed_stdin_never_blocks(tmp_path: Path, event: str, raw: str,
                                      fragment: str | None,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELINE_EMBEDDER", "hashing")
    store = tmp_path / "s"
    outcome = run_hook(event, raw, Config.load(home=store))
    assert outcome.stdout == ""
    errors = journal(store, ["hook_error"])
    if fragment is None:
        assert outcome.stderr == "" and not errors
        return
    assert outcome.stderr.startswith(f"tideline hook {event}: invalid_input: ")
    assert fragment in outcome.stderr and "\n" not in outcome.stderr
    assert len(errors) == 1 and errors[0]["data"]["event"] == event
    assert errors[0]["data"]["code"] == "invalid_input"
    assert fragment in errors[0]["data"]["message"]


def test_unknown_event_and_broken_store_exit_zero(tmp_path: Path) -> None:
    proc = run_hook_process("teleport", "{}", tmp_path / "s")
    assert proc.returncode == 0 and "unknown hook" in proc.stderr
    bad = tmp_path / "not-a-store"
    bad.mkdir()
    (bad / "tideline.db").write_bytes(b"this is not sqlite" * 100)
    proc = run_hook_process("session-start", {"hook_event_name": "SessionStart"}, bad)
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "store_corrupt" in proc.stderr
    assert "journal unavailable" in proc.stderr


def test_typer_hook_command_matches_fast_entry(seeded: Path, project: Path) -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, TIDELINE_HOME=str(seeded), TIDELINE_EMBEDDER="hashing")
    proc = subprocess.run([sys.executable, "-m", "tideline", "hook", "session-start"],
                          input=json.dumps(payload("session-start", project, source="resume")),
                          capture_output=True, text=True, env=env, cwd=project, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "E1234" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
