"""One project rule on every surface, inside a real git work tree and outside any.

Each surface runs as a user would: the CLI and the hooks as subprocesses, the MCP
server as a ``tideline serve`` subprocess over stdio, the Python API and the Hermes
provider in-process with the working directory changed. ``atlas`` is a real
``git init`` work tree; ``scratch`` is a plain directory (its own name is the project).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.hooks.conftest import SESSION, run_hook_process, write_transcript

from mcp import Client, StdioServerParameters
from tideline import Memory
from tideline.plugins.hermes import TidelineMemoryProvider

DETECTION_VARS = ("TIDELINE_PROJECT", "CLAUDE_PROJECT_DIR", "TERMINAL_CWD",
                  "ZCODE_PROJECT_DIR", "TIDELINE_AGENT_NAME")


def clean_env(store: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DETECTION_VARS}
    env.update(TIDELINE_HOME=str(store), TIDELINE_EMBEDDER="hashing", **extra)
    return env


def cli(*args: str, cwd: Path, store: Path, **extra: str) -> Any:
    proc = subprocess.run([sys.executable, "-m", "tideline", *args, "--json"],
                          capture_output=True, text=True, cwd=cwd, timeout=120,
                          env=clean_env(store, **extra))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    """``atlas`` (a real git work tree, entered in a subdirectory) and ``scratch``."""
    git = shutil.which("git")
    assert git, "git is needed to make a real work tree"
    repo = tmp_path / "atlas"
    repo.mkdir()
    subprocess.run([git, "init", "-q", str(repo)], check=True, timeout=60)
    inside = repo / "api" / "src"
    inside.mkdir(parents=True)
    outside = tmp_path / "scratch"
    outside.mkdir()
    return {"inside": inside, "outside": outside, "store": tmp_path / "store",
            "repo": repo}


@pytest.fixture
def no_detection_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in DETECTION_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TIDELINE_EMBEDDER", "hashing")
    yield


def test_hooks_store_and_cli_recalls_in_the_same_project(places: dict[str, Path]) -> None:
    """Reproducer (issue 10, item 3): inside the git work tree ``atlas`` the hooks stored
    under ``atlas`` but ``tideline recall "E1234 loader"`` found nothing without
    ``--scope atlas``, and ``introspect`` showed ``project: null, rule: none``."""
    inside, outside, store = places["inside"], places["outside"], places["store"]
    transcript = write_transcript(places["repo"] / "t" / f"{SESSION}.jsonl", inside)
    done = run_hook_process("session-end", {
        "session_id": SESSION, "transcript_path": str(transcript), "cwd": str(inside),
        "hook_event_name": "SessionEnd", "reason": "exit"}, store, cwd=inside)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    info = cli("introspect", cwd=inside, store=store)
    assert (info["project"], info["project_rule"]) == ("atlas", "git_root")
    assert info["project_detection"]["source"] == str(places["repo"].resolve())
    assert "atlas" in info["scopes"]
    found = cli("recall", "E1234 loader", cwd=inside, store=store)
    assert found["scope"] == "atlas" and not found["abstained"]
    assert any("E1234" in i["text"] and i["scope"] == "atlas" for i in found["items"])
    # Outside the work tree the directory names the project; atlas is not seen.
    there = cli("introspect", cwd=outside, store=store)
    assert (there["project"], there["project_rule"]) == ("scratch", "cwd")
    away = cli("recall", "E1234 loader", cwd=outside, store=store)
    assert away["scope"] == "scratch"
    assert all(i["scope"] in ("scratch", "global") for i in away["items"])


def test_cli_writes_default_to_the_project_and_global_kinds_to_global(
    places: dict[str, Path],
) -> None:
    inside, outside, store = places["inside"], places["outside"], places["store"]
    fact = cli("remember", "the atlas loader maps the region column", cwd=inside, store=store)
    assert fact["scope"] == "atlas"
    pref = cli("remember", "Mira likes short answers", "--kind", "preference", cwd=inside,
               store=store)
    assert pref["scope"] == "global"
    forced = cli("remember", "the build box is called hopper", "--scope", "global",
                 cwd=inside, store=store)
    assert forced["scope"] == "global"
    wrote = cli("write", "we decided on blue-green deploys", "--kind", "decision",
                cwd=outside, store=store)
    assert wrote["scope"] == "scratch"
    seen = cli("recall", "region column", cwd=inside, store=store)
    assert any(i["id"] == fact["id"] for i in seen["items"])
    # $TIDELINE_PROJECT wins over the work tree; "global" turns detection off.
    named = cli("introspect", cwd=inside, store=store, TIDELINE_PROJECT="zeta")
    assert (named["project"], named["project_rule"]) == ("zeta", "TIDELINE_PROJECT")
    off = cli("introspect", cwd=inside, store=store, TIDELINE_PROJECT="global")
    assert (off["project"], off["project_rule"]) == (None, "TIDELINE_PROJECT")
    assert cli("remember", "a fact for everyone", cwd=inside, store=store,
               TIDELINE_PROJECT="global")["scope"] == "global"


def test_python_api_detects_like_the_cli(places: dict[str, Path], no_detection_env: None,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(places["inside"])
    with Memory.open(places["store"]) as mem:
        assert (mem.project, mem.project_info.rule) == ("atlas", "git_root")
        assert mem.remember("atlas runs nightly exports at 02:00").scope == "atlas"
        assert mem.remember("Mira is vegetarian", kind="preference").scope == "global"
        assert mem.recall("nightly exports").scope == "atlas"
    monkeypatch.chdir(places["outside"])
    with Memory.open(places["store"]) as mem:
        assert (mem.project, mem.project_info.rule) == ("scratch", "cwd")
        packet = mem.recall("nightly exports 02:00", include_turns=False)
        assert all(i.scope in ("scratch", "global") for i in packet.items)
    with Memory.open(places["store"], project="global") as mem:
        assert mem.project is None and mem.introspect()["project"] is None
        assert mem.remember("a global fact").scope == "global"


def _mcp(cwd: Path, store: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "tideline", "serve"],
                                   env=clean_env(store), cwd=str(cwd))

    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with Client(params) as client:
            info = await client.call_tool("introspect", {})
            fact = await client.call_tool("memorize", {"text": f"a fact noted in {cwd.name}"})
            pref = await client.call_tool("memorize", {"text": "Mira likes tea",
                                                       "kind": "preference"})
            assert not (info.is_error or fact.is_error or pref.is_error)
            return (info.structured_content, fact.structured_content,
                    pref.structured_content)

    return anyio.run(main)


def test_mcp_server_detects_the_project(places: dict[str, Path]) -> None:
    info, fact, pref = _mcp(places["inside"], places["store"])
    assert (info["project"], info["project_rule"]) == ("atlas", "git_root")
    assert fact["memory"]["scope"] == "atlas" and pref["memory"]["scope"] == "global"
    info, fact, _pref = _mcp(places["outside"], places["store"])
    assert (info["project"], info["project_rule"]) == ("scratch", "cwd")
    assert fact["memory"]["scope"] == "scratch"


def test_hermes_provider_detects_the_project(places: dict[str, Path], no_detection_env: None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for where, name, rule in (("inside", "atlas", "git_root"), ("outside", "scratch", "cwd")):
        monkeypatch.chdir(places[where])
        provider = TidelineMemoryProvider(store=places["store"])
        provider.initialize(f"hs-{where}")
        try:
            mem = provider.memory
            assert (mem.project, mem.project_info.rule) == (name, rule)
            fact = json.loads(provider.handle_tool_call(
                "tideline_memorize", {"text": f"a fact learned in {where}"}))
            pref = json.loads(provider.handle_tool_call(
                "tideline_memorize", {"text": "Mira prefers tea", "kind": "preference"}))
            assert fact["scope"] == name and pref["scope"] == "global"
        finally:
            provider.shutdown()


def test_claude_importer_names_lines_like_the_hooks(places: dict[str, Path]) -> None:
    inside, outside, store = places["inside"], places["outside"], places["store"]
    folder = places["repo"].parent / "transcripts"
    write_transcript(folder / "in.jsonl", inside)
    out = write_transcript(folder / "out.jsonl", outside,
                           session="9d0e0f10-0000-4000-8000-000000000000")
    # Other message ids: a message uuid already stored would be skipped (idempotency).
    out.write_text(out.read_text("utf-8").replace('"u-', '"ou-').replace('"a-', '"oa-'),
                   encoding="utf-8")
    # Run from a third place: each line's own directory decides, not the importer's cwd.
    res = cli("import", "claude", str(folder), cwd=places["repo"].parent, store=store)
    assert res["inserted"] > 0
    info = cli("introspect", "--all-scopes", cwd=inside, store=store)
    assert {"atlas", "scratch"} <= set(info["scopes"])
    own = cli("introspect", cwd=inside, store=store)["scopes"]
    assert "atlas" in own and set(own) <= {"atlas", "global"}  # its own and global only
    hits = cli("recall", "E1234 loader", cwd=outside, store=store)
    assert any(i["scope"] == "scratch" for i in hits["items"])
    # $TIDELINE_PROJECT wins for the importer as it does for the hooks.
    other = places["repo"].parent / "store2"
    cli("import", "claude", str(folder), cwd=inside, store=other, TIDELINE_PROJECT="zeta")
    assert cli("introspect", "--all-scopes", cwd=inside, store=other)["scopes"] == ["zeta"]
