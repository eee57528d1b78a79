"""A brief worth reading from day one, and the agent's name where the model reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.conftest import hashing
from tests.hooks.conftest import run_hook_process

from mcp import Client, StdioServerParameters
from tideline import Memory
from tideline.config import Config
from tideline.errors import InvalidInput
from tideline.inject.tuning import InjectTuning
from tideline.mcp.server import TOOL_NAMES, build_server
from tideline.models import compute_weight
from tideline.plugins.hermes import TidelineMemoryProvider

FIVE = ["the atlas loader needs the region column mapped",
        "Mira takes her coffee black with no sugar",
        "orchard 2.5 ships on 9 December with zh-TW strings",
        "deploys go out blue-green behind the canary",
        "pg-atlas-01 runs PostgreSQL 16 behind PgBouncer"]


def cli(*args: str, cwd: Path, store: Path) -> Any:
    env = dict(os.environ, TIDELINE_HOME=str(store), TIDELINE_EMBEDDER="hashing")
    for var in ("TIDELINE_PROJECT", "CLAUDE_PROJECT_DIR", "TIDELINE_AGENT_NAME"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, "-m", "tideline", *args, "--json"], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def session_start(store: Path, cwd: Path, **env: str) -> str:
    proc = run_hook_process("session-start", {
        "session_id": "s-new", "cwd": str(cwd), "hook_event_name": "SessionStart",
        "source": "startup"}, store, cwd=cwd, **env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = json.loads(proc.stdout)
    return str(out["hookSpecificOutput"]["additionalContext"])


def test_new_store_brief_contains_its_five_memories(tmp_path: Path) -> None:
    """Reproducer (issue 10, item 9): `remember --importance 5` gave weight 0.35, below
    T2's 0.6, so SessionStart injected only counts."""
    work = tmp_path / "atlas"
    work.mkdir()
    store = tmp_path / "store"
    first = cli("remember", FIVE[0], "--importance", "5", cwd=work, store=store)
    assert first["scope"] == "atlas"
    for text in FIVE[1:]:
        cli("remember", text, cwd=work, store=store)
    brief = session_start(store, work)  # detected: the directory names the project
    for text in FIVE:
        assert text in brief, text
    # The seed's strict threshold is still one setting away.
    strict = session_start(store, work, TIDELINE_INJECT_T2_FILL="0")
    assert not any(text in strict for text in FIVE)


def test_all_four_weights_from_the_cli(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    store = tmp_path / "store"
    res = cli("remember", "the release is blocked on the zh-TW review", "--importance", "5",
              "--emotional", "4", "--recurrence", "3", "--unresolved", "5", cwd=work,
              store=store)
    shown = cli("show", str(res["id"]), cwd=work, store=store)
    assert (shown["importance"], shown["emotional"], shown["recurrence"],
            shown["unresolved"]) == (5, 4, 3, 5)
    assert shown["weight"] == pytest.approx(compute_weight(5, 4, 3, 5))
    wrote = cli("write", "we paused the deploy train", "--importance", "2", "--emotional", "5",
                "--recurrence", "2", "--unresolved", "4", cwd=work, store=store)
    shown = cli("show", str(wrote["id"]), cwd=work, store=store)
    assert (shown["emotional"], shown["unresolved"]) == (5, 4)
    proc = subprocess.run([sys.executable, "-m", "tideline", "remember", "x", "--emotional",
                           "9", "--store", str(store)], cwd=work, capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ, TIDELINE_EMBEDDER="hashing"))
    assert proc.returncode != 0 and "emotional" in proc.stderr


def test_t2_fills_from_the_top_of_the_store_only_while_the_pool_is_short(
    mem: Memory,
) -> None:
    low = [mem.remember(t).id for t in FIVE]
    t2 = mem.inject_brief(tiers=("T2",)).tier("T2")
    assert t2 is not None and [i["id"] for i in t2.items] != []
    assert {i["id"] for i in t2.items} == set(low)
    assert {i["pool"] for i in t2.items} == {"relative"}
    assert "from the top of the store" in t2.note
    mem.inject_tuning = InjectTuning(t2_fill=0)  # the seed's strict threshold
    strict = mem.inject_brief(tiers=("T2",)).tier("T2")
    assert strict is not None and strict.items == ()
    mem.inject_tuning = InjectTuning()
    heavy = [mem.write(f"decision {n}: {t}", kind="decision", importance=5, emotional=5,
                       recurrence=5, unresolved=5).id
             for n, t in enumerate(["use blue-green", "vacuum nightly", "keep kafka 7 days"])]
    t2 = mem.inject_brief(tiers=("T2",)).tier("T2")
    assert t2 is not None
    assert [i["id"] for i in t2.items] and {i["id"] for i in t2.items} == set(heavy)
    assert {i["pool"] for i in t2.items} == {"threshold"}


def test_agent_name_in_mcp_tools_and_instructions(tmp_path: Path) -> None:
    cfg = Config.load(home=tmp_path / "s", agent_name="  Ada\n Lovelace ")
    assert cfg.agent_name == "Ada Lovelace"
    with Memory.open(config=cfg, embedder=hashing(), project="global") as mem:
        server = build_server(mem)
        assert server.instructions is not None
        assert "long-term memory of Ada Lovelace" in server.instructions

        async def main() -> list[Any]:
            async with Client(server) as client:
                return list((await client.list_tools()).tools)

        tools = anyio.run(main)
        assert {t.name for t in tools} >= set(TOOL_NAMES)
        assert all(t.description.startswith("Memory of Ada Lovelace. ") for t in tools)
        mem.remember("Ada's store holds this")
        assert "long-term memory of Ada Lovelace" in mem.inject_brief().text
    with Memory.open(tmp_path / "s", embedder=hashing(), project="global") as plain:
        assert "Memory of" not in (build_server(plain).instructions or "")
    with pytest.raises(InvalidInput, match="agent_name"):
        Config.load(agent_name="x" * 81)
    with pytest.raises(InvalidInput, match="agent_name"):
        Config.load(agent_name="Ada\x00")


def test_agent_name_from_the_flag_the_env_and_in_hermes(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store"
    env = dict(os.environ, TIDELINE_HOME=str(store), TIDELINE_EMBEDDER="hashing")
    env.pop("TIDELINE_AGENT_NAME", None)
    params = StdioServerParameters(command=sys.executable, env=env, cwd=str(tmp_path),
                                   args=["-m", "tideline", "serve", "--agent-name", "Hopper"])

    async def main() -> list[Any]:
        async with Client(params) as client:
            return list((await client.list_tools()).tools)

    tools = anyio.run(main)
    assert tools and all(t.description.startswith("Memory of Hopper. ") for t in tools)
    work = tmp_path / "w"
    work.mkdir()
    cli("remember", "Hopper keeps the build green", cwd=work, store=store)
    brief = session_start(store, work, TIDELINE_AGENT_NAME="Hopper")
    assert "long-term memory of Hopper" in brief and 'agent="Hopper"' in brief
    monkeypatch.setenv("TIDELINE_AGENT_NAME", "Grace")
    provider = TidelineMemoryProvider(store=store, embedder="hashing")
    schemas = provider.get_tool_schemas()
    assert schemas and all(s["description"].startswith("Memory of Grace. ") for s in schemas)
    assert any(c["env_var"] == "TIDELINE_AGENT_NAME" for c in provider.get_config_schema())
    monkeypatch.delenv("TIDELINE_AGENT_NAME")
    assert not TidelineMemoryProvider(store=store).get_tool_schemas()[0]["description"] \
        .startswith("Memory of")
