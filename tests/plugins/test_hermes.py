"""The Tideline memory provider inside the real Hermes Agent (hermes-agent from PyPI).

The provider is installed with `tideline install hermes` into an isolated HERMES_HOME,
found by Hermes' own plugin loader, checked against its MemoryProvider base class, and
driven through Hermes' real MemoryManager. The tests that use the memory run on both
backends (tests/backend.py): on PostgreSQL the provider finds the database through
``TIDELINE_DATABASE_URL`` alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.backend import Backend
from tests.conftest import hashing

from tideline import Memory

pytestmark = pytest.mark.backends


@pytest.fixture
def hermes_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                backend: Backend) -> Iterator[Path]:
    home = tmp_path / "hermes"
    store = tmp_path / "store"
    repo = tmp_path / "orchard"
    (repo / ".git").mkdir(parents=True)
    seed = Memory.open(store, embedder=hashing(), project="orchard")
    backend.check(seed)
    seed.write("Orchard exports run as a nightly cron job at 02:00", scope="orchard",
               importance=5, emotional=4, recurrence=4, unresolved=3, tags=["exports"])
    seed.update_self_concept("fact", "I am Hermes working on orchard.")
    seed.close()
    env = dict(os.environ, HERMES_HOME=str(home))
    proc = subprocess.run([sys.executable, "-m", "tideline", "install", "hermes", "--json"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    messages = json.loads(proc.stdout)["messages"]
    assert any("memory.provider set to 'tideline'" in m for m in messages), messages
    for key, value in {"HERMES_HOME": str(home), "TIDELINE_HOME": str(store),
                       "TIDELINE_EMBEDDER": "hashing", "TERMINAL_CWD": str(repo)}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("TIDELINE_PROJECT", raising=False)
    yield home
    for name in [m for m in sys.modules if m.startswith("_hermes_user_memory")]:
        del sys.modules[name]


def test_installed_provider_is_found_and_selected(hermes_home: Path) -> None:
    from agent.memory_provider import MemoryProvider
    from hermes_cli.config import load_config
    from plugins.memory import discover_memory_providers, load_memory_provider

    assert load_config()["memory"]["provider"] == "tideline"
    names = {name: ok for name, _desc, ok in discover_memory_providers()}
    assert names.get("tideline") is True
    provider = load_memory_provider("tideline")
    assert isinstance(provider, MemoryProvider)
    assert type(provider).__name__ == "TidelineMemoryProvider" and provider.name == "tideline"
    assert provider.is_available()
    assert any(s["name"] == "tideline_recall" for s in provider.get_tool_schemas())


def test_provider_through_the_memory_manager(hermes_home: Path, tmp_path: Path,
                                             backend: Backend) -> None:
    from agent.memory_manager import MemoryManager
    from plugins.memory import load_memory_provider

    provider: Any = load_memory_provider("tideline")
    manager = MemoryManager()
    manager.add_provider(provider)
    manager.initialize_all(session_id="hs-1", platform="cli", hermes_home=str(hermes_home),
                           agent_context="primary")
    block = manager.build_system_prompt()
    assert "<tideline-recalled-data" in block and "02:00" in block
    assert "I am Hermes working on orchard." in block
    assert "project orchard (detected by TERMINAL_CWD)" in block

    context = manager.prefetch_all("when do the orchard exports run?", session_id="hs-1")
    assert "02:00" in context and "## T1" in context

    manager.sync_all("Please move the orchard export to 03:00.",
                     "Done: the cron job now runs at 03:00.", session_id="hs-1",
                     messages=[{"role": "user",
                                "content": "Please move the orchard export to 03:00."},
                               {"role": "assistant",
                                "content": "Done: the cron job now runs at 03:00."}])
    assert manager.flush_pending(timeout=60)
    tool = json.loads(manager.handle_tool_call("tideline_memorize", {
        "text": "orchard exports moved to 03:00", "kind": "decision"}))
    assert tool["decision"] in ("new", "link", "potentiate") and tool["scope"] == "orchard"
    recalled = json.loads(manager.handle_tool_call("tideline_recall",
                                                   {"query": "orchard export 03:00"}))
    assert recalled["items"] and "<tideline-recalled-data" in recalled["text"]
    error = json.loads(manager.handle_tool_call("tideline_reflect", {"ids": [], "reward": 9}))
    assert error["error"]["code"] == "invalid_input"
    manager.on_memory_write("add", "user", "The user likes concise answers.")

    messages = [{"role": "system", "content": "You are Hermes."},
                {"role": "user", "content": "Please move the orchard export to 03:00."},
                {"role": "assistant", "content": "Done: the cron job now runs at 03:00."},
                {"role": "user", "content": "Thanks, and log it in the runbook."},
                {"role": "assistant", "content": "Logged."}]
    manager.on_pre_compress(messages[:3])
    manager.on_session_end(messages)
    manager.shutdown_all()

    # On PostgreSQL, read back from another host: what the provider stored is in the database.
    mem = Memory.open(tmp_path / ("store" if backend.is_sqlite else "another-host"),
                      embedder=hashing())
    backend.check(mem)
    try:
        turns = mem.read_context(session="hs-1", limit=20, scope="orchard")["turns"]
        texts = [t["text"] for t in turns]
        # Captured once each, whether by sync_turn, pre-compress or session end.
        assert texts == ["Please move the orchard export to 03:00.",
                         "Done: the cron job now runs at 03:00.",
                         "Thanks, and log it in the runbook.", "Logged."]
        assert {t["scope"] for t in turns} == {"orchard"} and {t["source"] for t in turns} == {
            "hermes"}
        prefs = mem.recall("concise answers", scope="global", kind="preference")
        assert prefs.items and prefs.items[0].scope == "global"
        tiers = {e["data"]["tier"] for e in mem.events(kinds=["recall"], limit=50)}
        assert "T1" in tiers
        assert not mem.events(kinds=["hook_error"])
    finally:
        mem.close()


def test_subagent_contexts_do_not_write(hermes_home: Path, tmp_path: Path) -> None:
    from tideline.plugins.hermes import TidelineMemoryProvider

    provider = TidelineMemoryProvider()
    provider.initialize("sub-1", hermes_home=str(hermes_home), platform="cli",
                        agent_context="subagent")
    provider.sync_turn("secret sub-agent chatter", "ok", session_id="sub-1")
    provider.on_session_end([{"role": "user", "content": "more chatter"}])
    assert provider.system_prompt_block()  # reading is fine
    provider.shutdown()
    mem = Memory.open(tmp_path / "store", embedder=hashing())
    try:
        assert mem.read_context(session="sub-1", scope="orchard")["turns"] == []
    finally:
        mem.close()


def test_uninstall_removes_the_shim(hermes_home: Path) -> None:
    env = dict(os.environ, HERMES_HOME=str(hermes_home))
    proc = subprocess.run([sys.executable, "-m", "tideline", "uninstall", "hermes", "--json"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert not (hermes_home / "plugins" / "tideline").exists()
    from hermes_cli.config import load_config

    assert not load_config()["memory"].get("provider")


HERMES_CONFIG = ('# my Hermes settings\nmodel:\n  default: "anthropic/claude-opus"   # keep\n'
                 'memory:\n  provider: holographic\n  memory_enabled: true\n')


def _hermes(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "hermes"
    env = dict(os.environ, HERMES_HOME=str(home))
    return subprocess.run([str(exe), *args], env=env, capture_output=True, text=True,
                          timeout=300)


def _tideline(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HERMES_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "tideline", *args, "--json"], env=env,
                          capture_output=True, text=True, timeout=300)


def _status_provider(home: Path) -> str:
    proc = _hermes(home, "memory", "status")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln.split(":", 1)[1].strip() for ln in proc.stdout.splitlines()
             if ln.strip().startswith("Provider:")]
    assert len(lines) == 1, proc.stdout
    return lines[0]


def test_install_replaces_and_uninstall_restores_the_previous_provider(tmp_path: Path) -> None:
    """Issue 10 item 7: uninstall set `provider: ''` instead of restoring the previous one
    (`holographic` → `''`) and install replaced another provider without a word. Checked
    with the real `hermes memory status` and Hermes' own loader."""
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text(HERMES_CONFIG)
    assert _status_provider(home) == "holographic"
    before = {p.relative_to(home) for p in home.rglob("*")}

    done = _tideline(home, "install", "hermes")
    assert done.returncode == 0, done.stderr
    res = json.loads(done.stdout)
    assert res["previous_provider"] == "holographic"
    assert "replacing the memory provider 'holographic'" in done.stderr
    assert _status_provider(home) == "tideline"
    loaded = subprocess.run(
        [sys.executable, "-c", "from plugins.memory import load_memory_provider as load\n"
         "p = load('tideline'); print(type(p).__module__, type(p).__name__, p.name)"],
        env=dict(os.environ, HERMES_HOME=str(home)), capture_output=True, text=True,
        timeout=300)
    assert loaded.stdout.split() == ["tideline.plugins.hermes", "TidelineMemoryProvider",
                                     "tideline"], loaded.stderr
    again = _tideline(home, "install", "hermes")  # re-install: the previous one stays known
    assert json.loads(again.stdout)["previous_provider"] == "holographic"
    assert "replacing" not in again.stderr

    gone = _tideline(home, "uninstall", "hermes")
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["restored_provider"] == "holographic"
    assert _status_provider(home) == "holographic"
    assert (home / "config.yaml").read_text() == HERMES_CONFIG  # comments and quotes too
    after = {p.relative_to(home) for p in home.rglob("*")}
    assert not [p for p in after - before if "tideline" in str(p) or p.parts[0] == "plugins"]


def test_uninstall_after_other_config_edits_selects_the_previous_provider(
        tmp_path: Path) -> None:
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text(HERMES_CONFIG)
    assert _tideline(home, "install", "hermes").returncode == 0
    assert _hermes(home, "config", "set", "model.default", "openai/gpt-5").returncode == 0
    gone = _tideline(home, "uninstall", "hermes")
    assert gone.returncode == 0, gone.stderr
    assert _status_provider(home) == "holographic"
    assert _hermes(home, "config", "get", "model.default").stdout.strip() == "openai/gpt-5"
    assert (home / "config.yaml.tideline-backup").read_text() == HERMES_CONFIG
    assert not (home / "plugins" / "tideline").exists()


def test_recall_without_a_query_is_an_error(hermes_home: Path) -> None:
    """Issue 10 item 7: `tideline_recall` with no query abstained instead of erroring."""
    from plugins.memory import load_memory_provider

    provider: Any = load_memory_provider("tideline")
    provider.initialize("hs-2", hermes_home=str(hermes_home), platform="cli")
    try:
        for args in ({}, {"query": ""}, {"query": "   "}, {"query": 7}):
            answer = json.loads(provider.handle_tool_call("tideline_recall", args))
            assert answer["error"]["code"] == "invalid_input", args
            assert "query" in answer["error"]["message"]
    finally:
        provider.shutdown()
