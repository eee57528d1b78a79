"""The warm prefetch server: started by session-start, used by the prompt hook, idles out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import hashing
from tests.hooks.conftest import SESSION, hook_env, run_hook_process

from tideline import Memory
from tideline.hooks import warm


def test_session_start_spawns_and_prompt_uses_the_warm_server(tmp_path: Path,
                                                              monkeypatch) -> None:
    store = tmp_path / "store"
    repo = tmp_path / "atlas"
    (repo / ".git").mkdir(parents=True)
    m = Memory.open(store, embedder=hashing(), project="atlas")
    m.write("We fixed loader error E1234 by mapping the region column", scope="atlas",
            importance=5, emotional=4, recurrence=4, unresolved=2)
    m.close()
    env = {"TIDELINE_WARM": "always", "TIDELINE_WARM_IDLE": "60"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    base = {"session_id": SESSION, "cwd": str(repo), "transcript_path": str(repo / "t.jsonl")}
    start = run_hook_process("session-start", base | {"hook_event_name": "SessionStart"},
                             store, cwd=repo, **env)
    assert start.returncode == 0 and "E1234" in start.stdout
    pong = None
    deadline = time.time() + 90
    while time.time() < deadline and pong is None:
        pong = warm.ask(store, "default", {"op": "ping"}, timeout=2)
        time.sleep(0.2)
    assert pong is not None, "the warm server did not come up"
    try:
        assert oct(warm.socket_path(store, "default").stat().st_mode & 0o777) == "0o600"
        prompt = run_hook_process("prompt", base | {"hook_event_name": "UserPromptSubmit",
                                                    "prompt": "loader E1234"},
                                  store, cwd=repo, **env)
        assert prompt.returncode == 0, prompt.stderr
        ctx = json.loads(prompt.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "region column" in ctx
        mem = Memory.open(store, embedder=hashing())
        try:
            inject = mem.events(kinds=["inject"], limit=1, all_scopes=True)[0]["data"]
            assert inject["served_by"] == "warm" and inject["kind"] == "prefetch"
            assert any(e["data"]["tier"] == "T1"
                       for e in mem.events(kinds=["recall"], all_scopes=True))
            # A memory written by another process after the server started is found too.
            mem.remember("orchard cron moved to 03:00", scope="atlas")
        finally:
            mem.close()
        answer = warm.ask(store, "default", {"op": "prefetch", "query": "orchard cron 03:00",
                                             "project": {"name": "atlas", "rule": "explicit"}})
        assert answer is not None and "03:00" in answer["result"]["text"]
        # A client of another version makes it step down; the hook then works in-process.
        stale = warm.ask(store, "default", {"op": "ping", "version": "0.0.0-other"})
        assert stale is None
    finally:
        if pong is not None:
            try:
                os.kill(int(pong["pid"]), signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.time() + 30
    while time.time() < deadline and warm.alive(store, "default"):
        time.sleep(0.2)
    assert not warm.alive(store, "default")


def test_warm_is_off_for_cheap_embedders_and_when_disabled(tmp_path: Path, monkeypatch) -> None:
    store = tmp_path / "store"
    Memory.open(store, embedder=hashing()).close()
    monkeypatch.delenv("TIDELINE_WARM", raising=False)
    assert warm.mode() == "auto" and not warm.wanted(store)
    assert warm.spawn(store, "default") is False
    monkeypatch.setenv("TIDELINE_WARM", "off")
    assert not warm.enabled() and warm.ask(store, "default", {"op": "ping"}) is None
    monkeypatch.setenv("TIDELINE_WARM", "always")
    assert warm.wanted(store)
    path = warm.socket_path(store, "default")
    assert len(str(path)) < 100 and path.name.startswith("warm-")


def _wait_gone(store: Path, pid: int) -> bool:
    deadline = time.time() + 30
    while time.time() < deadline:
        if not warm.socket_path(store, "default").exists():
            try:  # gone, or a zombie child of this test process (exited, not yet reaped)
                if Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] == "Z":
                    return True
            except FileNotFoundError:
                return True
        time.sleep(0.1)
    return False


def test_first_prompt_after_session_start_is_served_warm(tmp_path: Path, monkeypatch) -> None:
    """Issue 10 item 8: the first prompt of every session was cold — the warm server was not
    up yet, so the prompt hook loaded the model in-process. Now it waits (bounded) for the
    server session-start spawned; `tideline uninstall claude` then stops that server."""
    store = tmp_path / "store"
    repo = tmp_path / "atlas"
    home = tmp_path / "home"
    home.mkdir()
    (repo / ".git").mkdir(parents=True)
    m = Memory.open(store, embedder=hashing(), project="atlas")
    m.write("We fixed loader error E1234 by mapping the region column", scope="atlas",
            importance=5, emotional=4, recurrence=4, unresolved=2)
    m.close()
    env = {"TIDELINE_WARM": "always", "TIDELINE_WARM_IDLE": "120", "TIDELINE_WARM_WAIT": "60",
           "HOME": str(home)}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    base = {"session_id": SESSION, "cwd": str(repo), "transcript_path": str(repo / "t.jsonl")}
    installed = subprocess.run([sys.executable, "-m", "tideline", "install", "claude",
                                "--store", str(store), "--json"], env=hook_env(store, **env),
                               capture_output=True, text=True, timeout=120)
    assert installed.returncode == 0, installed.stderr
    start = run_hook_process("session-start", base | {"hook_event_name": "SessionStart"},
                             store, cwd=repo, **env)
    assert start.returncode == 0 and "E1234" in start.stdout
    # At once, as `claude -p` does: the server is still starting.
    prompt = run_hook_process("prompt", base | {"hook_event_name": "UserPromptSubmit",
                                                "prompt": "loader E1234"},
                              store, cwd=repo, **env)
    assert prompt.returncode == 0, prompt.stderr
    assert "region column" in json.loads(prompt.stdout)["hookSpecificOutput"]["additionalContext"]
    pong = warm.ask(store, "default", {"op": "ping"}, timeout=5)
    assert pong is not None
    try:
        mem = Memory.open(store, embedder=hashing())
        try:
            inject = mem.events(kinds=["inject"], limit=1, all_scopes=True)[0]["data"]
            assert inject["kind"] == "prefetch" and inject["served_by"] == "warm"
            # The server's warm-up prefetch journals nothing: only the hook's own recall.
            recalls = mem.events(kinds=["recall"], limit=50, all_scopes=True)
            assert recalls and "warm up" not in json.dumps(recalls)
        finally:
            mem.close()
        # A second session-start does not start a second server.
        again = run_hook_process("session-start", base | {"hook_event_name": "SessionStart"},
                                 store, cwd=repo, **env)
        assert again.returncode == 0
        assert warm.ask(store, "default", {"op": "ping"}, timeout=5)["pid"] == pong["pid"]
        gone = subprocess.run([sys.executable, "-m", "tideline", "uninstall", "claude",
                               "--json"], env=hook_env(store, **env), capture_output=True,
                              text=True, timeout=120)
        assert gone.returncode == 0, gone.stderr
        assert json.loads(gone.stdout)["warm_stopped"] == [pong["pid"]]
        assert _wait_gone(store, int(pong["pid"]))
        assert not warm.alive(store, "default")
        assert not (home / ".claude" / "settings.json").exists()
    finally:
        try:
            os.kill(int(pong["pid"]), signal.SIGTERM)
        except ProcessLookupError:
            pass


def test_prompt_does_not_wait_when_no_server_is_starting(tmp_path: Path, monkeypatch) -> None:
    store = tmp_path / "store"
    Memory.open(store, embedder=hashing()).close()
    monkeypatch.setenv("TIDELINE_WARM", "always")
    assert warm.wait_ready(store, "default", limit=600) is False
    assert warm.stop(store, "default") is None
    # A marker left by a spawn whose process is gone is not waited for either.
    marker = warm.socket_path(store, "default").with_suffix(".starting")
    marker.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, timeout=60)
    marker.write_text(proc.stdout.strip())
    try:
        assert warm.wait_ready(store, "default", limit=600) is False
        assert warm.spawn(store, "default") is True  # a dead marker does not block a spawn
        pid = int(marker.read_text())
        assert warm.wait_ready(store, "default", limit=120) is True
        assert warm.stop(store, "default") == pid
        assert _wait_gone(store, pid)
    finally:
        marker.unlink(missing_ok=True)
