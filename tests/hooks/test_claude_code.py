"""The real Claude Code CLI (pinned in package.json, in ./node_modules), isolated HOME,
settings written by `tideline install claude`.

No login is needed: Claude Code runs SessionStart and UserPromptSubmit hooks before it
talks to the model. The assertions are on what the hooks produced — the context
Claude Code recorded in its session transcript, and Tideline's journal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import hashing, node_tool

from tideline import Memory


def test_claude_code_runs_tideline_hooks(tmp_path: Path) -> None:
    claude = node_tool("claude")
    home, store, project = tmp_path / "home", tmp_path / "store", tmp_path / "atlas"
    home.mkdir()
    (project / ".git").mkdir(parents=True)
    seed = Memory.open(store, embedder=hashing(), project="atlas")
    seed.write("Marker-7731: the atlas loader needs schema.yaml updated for every new column",
               scope="atlas", importance=5, emotional=4, recurrence=4, unresolved=3)
    seed.close()

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "CLAUDE", "TIDELINE_"))}
    env.update(HOME=str(home), TIDELINE_EMBEDDER="hashing", DISABLE_TELEMETRY="1",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
    install = subprocess.run([sys.executable, "-m", "tideline", "install", "claude",
                              "--store", str(store), "--json"],
                             env=env, capture_output=True, text=True, timeout=120)
    assert install.returncode == 0, install.stderr
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert "SessionStart" in settings["hooks"] and "UserPromptSubmit" in settings["hooks"]

    proc = subprocess.run([claude, "-p", "How do I add a column to the atlas loader?"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=240)
    # Without a login the model call fails; the hooks ran before it.
    transcripts = list((home / ".claude" / "projects").rglob("*.jsonl"))
    assert transcripts, proc.stdout + proc.stderr
    contexts: dict[str, list[str]] = {}
    for path in transcripts:
        for raw in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(raw)
            att = entry.get("attachment") or {}
            if att.get("type") == "hook_additional_context":
                contexts.setdefault(att["hookEvent"], []).extend(att["content"])
    start = "\n".join(contexts.get("SessionStart", []))
    prompt = "\n".join(contexts.get("UserPromptSubmit", []))
    assert "<tideline-recalled-data" in start and "Marker-7731" in start
    assert "project atlas (detected by" in start
    assert "<tideline-recalled-data" in prompt and "Marker-7731" in prompt

    mem = Memory.open(store, embedder=hashing())
    try:
        events = mem.events(limit=200, all_scopes=True)
        kinds = [e["kind"] for e in events]
        assert "hook_error" not in kinds, [e for e in events if e["kind"] == "hook_error"]
        injects = {e["data"]["kind"] for e in events if e["kind"] == "inject"}
        assert injects == {"brief", "prefetch"}
        assert any(e["kind"] == "recall" and e["data"]["tier"] == "T1" for e in events)
        # SessionEnd imported the transcript: the user's prompt is raw context now.
        hits = mem.read_context(query="add a column to the atlas loader", scope="atlas")["turns"]
        assert any("How do I add a column" in t["text"] for t in hits)
    finally:
        mem.close()
