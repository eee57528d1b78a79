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
    for name in ("CLAUDE_CONFIG_DIR", "XDG_STATE_HOME", "TIDELINE_HOME", "TIDELINE_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
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
    assert servers["tideline"]["env"] == {"TIDELINE_HOME": str(home / "mem"),
                                          "TIDELINE_NAMESPACE": "default"}
    assert (claude_json.stat().st_mode & 0o777) == 0o600

    before = (settings.read_text(), claude_json.read_text())
    again = install_claude("user", store=home / "mem")
    assert not any(c.changed for c in again)
    assert [c.backup for c in again] == [c.backup for c in changes]  # the one backup, kept
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
    assert not (proj / ".claude").exists() and not (proj / ".mcp.json").exists()
    # Portable: commands found on PATH, recognised (and replaced) like the absolute ones.
    install_claude("project", project_dir=proj)
    install_claude("project", project_dir=proj, portable=True)
    hooks = read(proj / ".claude" / "settings.json")["hooks"]
    commands = [h["command"] for g in hooks["SessionStart"] for h in g["hooks"]]
    assert commands == ["tideline hook session-start"]
    assert read(proj / ".mcp.json")["mcpServers"]["tideline"] == {
        "type": "stdio", "command": "tideline", "args": ["serve"]}
    uninstall_claude("project", project_dir=proj)
    assert sorted(p.name for p in proj.iterdir()) == []


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
    assert not (home / ".claude" / "settings.json").exists()
    assert not (home / ".claude.json").exists()


def backups(*dirs: Path) -> list[Path]:
    return sorted(p for d in dirs if d.exists() for p in d.rglob("*tideline-backup*"))


def test_uninstall_restores_the_exact_bytes_and_leaves_no_backup(home: Path) -> None:
    """Issue 10 item 6: after one install/uninstall cycle backups piled up (4 files) and a
    `"hooks": {}` that was there before was removed. Now each file gets its pre-install
    bytes back, keys that were there stay, and no backup is left."""
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = '{\n    "model": "opus",   "hooks": {},\n    "env": {"A": "1"}\n}\n'
    settings.write_text(original)
    claude_json = home / ".claude.json"
    claude_original = '{"userID": "u", "mcpServers": {}, "projects": {"/x": {"a": [1, 2.50]}}}'
    claude_json.write_text(claude_original)
    os.chmod(claude_json, 0o600)

    first = install_claude("user", store=home / "mem")
    assert [c.backup for c in first] == [settings.with_name("settings.json.tideline-backup"),
                                         home / ".claude.json.tideline-backup"]
    install_claude("user", store=home / "other")  # re-pinned: still the one first backup
    install_claude("user", store=home / "other", namespace="work")
    assert backups(home) == sorted(c.backup for c in first if c.backup)
    assert settings.with_name("settings.json.tideline-backup").read_text() == original

    restored = uninstall_claude("user")
    assert [c.to_dict()["action"] for c in restored] == ["restored", "restored"]
    assert settings.read_text() == original
    assert claude_json.read_text() == claude_original
    assert (claude_json.stat().st_mode & 0o777) == 0o600
    assert backups(home) == []


def test_uninstall_after_other_edits_keeps_them_and_one_backup(home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"hooks": {}, "model": "opus"}))
    install_claude("user")
    edited = read(settings) | {"theme": "dark"}
    settings.write_text(json.dumps(edited))
    changes = uninstall_claude("user")
    assert read(settings) == {"hooks": {}, "model": "opus", "theme": "dark"}
    assert backups(home) == [settings.with_name("settings.json.tideline-backup")]
    assert "kept" in " ".join(changes[0].changes)
    # The next install cycle starts from what is there now: still one backup, of that.
    install_claude("user")
    assert backups(home) == [settings.with_name("settings.json.tideline-backup")]
    uninstall_claude("user")
    assert read(settings) == {"hooks": {}, "model": "opus", "theme": "dark"}
    assert backups(home) == []
    assert not (home / ".claude.json").exists()  # created by install, removed by uninstall


def test_project_scope_leaves_no_trace_in_the_repository(home: Path, tmp_path: Path) -> None:
    """Issue 10 item 6: at project scope `{}` settings files and `*.tideline-backup-*`
    files stayed in the repository."""
    proj = tmp_path / "atlas"
    (proj / ".git").mkdir(parents=True)
    mcp = proj / ".mcp.json"
    mcp_original = '{\n  "mcpServers": {\n    "db": {"command": "pg-mcp"}\n  }\n}\n'
    mcp.write_text(mcp_original)
    before = sorted(p.relative_to(proj) for p in proj.rglob("*"))
    changes = install_claude("project", project_dir=proj)
    assert all(c.backup is None or proj not in c.backup.parents for c in changes)
    assert backups(proj) == []
    assert changes[1].backup is not None and changes[1].backup.exists()
    uninstall_claude("project", project_dir=proj)
    assert sorted(p.relative_to(proj) for p in proj.rglob("*")) == before
    assert mcp.read_text() == mcp_original
    assert backups(proj, home) == []


def test_install_pins_the_store_it_was_run_with(home: Path, tmp_path: Path) -> None:
    """Issue 10 item 5: with TIDELINE_HOME set, the hooks and the MCP entry carried no
    store, and the output did not say which store, project rule and Python were wired."""
    store = tmp_path / "pinned-store"
    proj = tmp_path / "atlas"
    (proj / ".git").mkdir(parents=True)
    secret = "s3cr3t-token-that-must-stay-out-0123456789"
    env = dict(os.environ, HOME=str(home), TIDELINE_HOME=str(store),
               TIDELINE_NAMESPACE="work", TIDELINE_MCP_TOKEN=secret)
    for name in ("CLAUDE_CONFIG_DIR", "XDG_STATE_HOME", "TIDELINE_PROJECT", "CLAUDE_PROJECT_DIR"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "tideline", "install", "claude", "--json"],
                          env=env, cwd=proj, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["store"] == str(store.resolve()) and out["namespace"] == "work"
    assert out["python"] == sys.executable
    assert out["project"]["name"] == "atlas" and out["project"]["rule"] == "git_root"
    assert [f["action"] for f in out["files"]] == ["created", "created"]
    settings = read(home / ".claude" / "settings.json")
    commands = [h["command"] for groups in settings["hooks"].values() for g in groups
                for h in g["hooks"]]
    assert len(commands) == len(HOOK_EVENTS)
    assert all(f"--store {store.resolve()} --namespace work" in c for c in commands)
    entry = read(home / ".claude.json")["mcpServers"]["tideline"]
    assert entry["env"] == {"TIDELINE_HOME": str(store.resolve()), "TIDELINE_NAMESPACE": "work"}
    # The MCP token is never written into a command line or a settings file.
    assert secret not in (home / ".claude" / "settings.json").read_text()
    assert secret not in (home / ".claude.json").read_text() and secret not in done.stdout
    human = subprocess.run([sys.executable, "-m", "tideline", "install", "claude"], env=env,
                           cwd=proj, capture_output=True, text=True, timeout=120)
    assert f"store:     {store.resolve()}" in human.stdout
    assert f"python:    {sys.executable}" in human.stdout
    assert "here: atlas (rule git_root)" in human.stdout
