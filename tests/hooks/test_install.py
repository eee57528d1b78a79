"""`tideline install claude` / `uninstall claude`: idempotent, backed up, exact removal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tideline.errors import InvalidInput
from tideline.hooks.install import HOOK_EVENTS, install_claude, uninstall_claude


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return h


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_user_scope_install_is_idempotent_and_keeps_other_settings(home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"type": "command", "command": "echo keep-me"}
    settings.write_text(json.dumps({"model": "opus", "hooks": {
        "Stop": [{"hooks": [mine]}], "PreToolUse": [{"matcher": "Bash", "hooks": [mine]}]}}))
    claude_json = home / ".claude.json"
    claude_json.write_text(json.dumps({"userID": "u", "mcpServers": {"other": {
        "type": "stdio", "command": "other-server"}}}))
    os.chmod(claude_json, 0o600)

    changes = install_claude("user", store=home / "mem")
    assert all(c.changed and c.backup is not None and c.backup.exists() for c in changes)
    data = read(settings)
    assert data["model"] == "opus"
    assert data["hooks"]["PreToolUse"] == [{"matcher": "Bash", "hooks": [mine]}]
    for event, (cmd, timeout, background) in HOOK_EVENTS.items():
        ours = [h for g in data["hooks"][event] for h in g["hooks"]
                if "tideline.hooks" in h["command"]]
        assert len(ours) == 1 and ours[0]["command"].split()[3] == cmd
        assert ours[0]["timeout"] == timeout and ours[0].get("async", False) == background
        assert f"--store {home / 'mem'}" in ours[0]["command"]
    assert mine in data["hooks"]["Stop"][0]["hooks"]
    servers = read(claude_json)["mcpServers"]
    assert servers["other"] == {"type": "stdio", "command": "other-server"}
    assert servers["tideline"]["type"] == "stdio" and "serve" in servers["tideline"]["args"]
    assert servers["tideline"]["env"] == {"TIDELINE_HOME": str(home / "mem")}
    assert (claude_json.stat().st_mode & 0o777) == 0o600

    before = (settings.read_text(), claude_json.read_text())
    again = install_claude("user", store=home / "mem")
    assert not any(c.changed for c in again) and all(c.backup is None for c in again)
    assert (settings.read_text(), claude_json.read_text()) == before

    removed = uninstall_claude("user")
    assert all(c.changed for c in removed)
    assert read(settings) == {"model": "opus", "hooks": {
        "Stop": [{"hooks": [mine]}], "PreToolUse": [{"matcher": "Bash", "hooks": [mine]}]}}
    assert read(claude_json) == {"userID": "u", "mcpServers": {"other": {
        "type": "stdio", "command": "other-server"}}}
    assert not any(c.changed for c in uninstall_claude("user"))


def test_project_scope_dry_run_and_fresh_files(home: Path, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    planned = install_claude("project", project_dir=proj, dry_run=True)
    assert [c.path for c in planned] == [proj / ".claude" / "settings.json", proj / ".mcp.json"]
    assert all(c.changed and "+" in c.diff() for c in planned)
    assert not (proj / ".claude").exists() and not (proj / ".mcp.json").exists()
    install_claude("project", project_dir=proj)
    assert set(read(proj / ".claude" / "settings.json")["hooks"]) == set(HOOK_EVENTS)
    assert "tideline" in read(proj / ".mcp.json")["mcpServers"]
    uninstall_claude("project", project_dir=proj)
    assert read(proj / ".claude" / "settings.json") == {}
    assert read(proj / ".mcp.json") == {}
    # Portable: commands found on PATH, recognised (and replaced) like the absolute ones.
    install_claude("project", project_dir=proj)
    install_claude("project", project_dir=proj, portable=True)
    hooks = read(proj / ".claude" / "settings.json")["hooks"]
    commands = [h["command"] for g in hooks["SessionStart"] for h in g["hooks"]]
    assert commands == ["tideline hook session-start"]
    assert read(proj / ".mcp.json")["mcpServers"]["tideline"] == {
        "type": "stdio", "command": "tideline", "args": ["serve"]}
    uninstall_claude("project", project_dir=proj)
    assert read(proj / ".claude" / "settings.json") == {}


def test_invalid_settings_are_left_alone(home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{ broken")
    with pytest.raises(InvalidInput, match="not valid JSON"):
        install_claude("user")
    assert settings.read_text() == "{ broken"
    assert not (home / ".claude.json").exists()


def test_cli_install_and_uninstall(home: Path, tmp_path: Path) -> None:
    env = dict(os.environ, HOME=str(home))
    env.pop("CLAUDE_CONFIG_DIR", None)
    run = [sys.executable, "-m", "tideline"]
    dry = subprocess.run([*run, "install", "claude", "--dry-run"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert dry.returncode == 0 and "tideline.hooks session-start" in dry.stdout
    assert not (home / ".claude" / "settings.json").exists()
    done = subprocess.run([*run, "install", "claude", "--json"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [f["changed"] for f in json.loads(done.stdout)["files"]] == [True, True]
    bad = subprocess.run([*run, "install", "claude", "--scope", "galaxy"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 3 and "scope" in bad.stderr
    gone = subprocess.run([*run, "uninstall", "claude", "--json"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert gone.returncode == 0
    assert read(home / ".claude" / "settings.json") == {}
