"""The CLI and the MCP server word write, reflect, revise and forget outcomes alike.

Issue 11 ("one source for what surfaces repeat", review §1 "Thin surfaces"): the
CLI kept its own ``_write_line`` and both surfaces spelled the reflect, revise and
forget lines out themselves; now each line is one function of :mod:`tideline.render`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import hashing
from tests.mcp.conftest import run_with, text_of

import tideline.cli.commands
from mcp import Client
from tideline import Memory
from tideline.render import forget_line, reflect_line, revise_line, write_line


def _cli(store: Path, *args: str) -> str:
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing")
    proc = subprocess.run([sys.executable, "-m", "tideline", *args, "--store", str(store),
                           "--scope", "atlas"], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_cli_prints_the_render_lines(tmp_path: Path) -> None:
    store = tmp_path / "s"
    line = _cli(store, "remember", "the atlas loader reads CSV with a BOM")
    with Memory.open(store, embedder=hashing(), project="atlas") as mem:
        rec = mem.get(int(line.split("#")[1].split()[0]))
    assert line == write_line({"decision": "new", "id": rec.id, "scope": "atlas"})
    assert _cli(store, "reflect", str(rec.id), "999999") == reflect_line(
        {"updated": [rec.id], "missing": [999999]})
    revised = _cli(store, "revise", str(rec.id), "the atlas loader strips the BOM first")
    new_id = int(revised.split("#")[1].split()[0])
    assert revised == revise_line(new_id, rec.id)
    assert _cli(store, "forget", str(new_id)) == forget_line({"forgotten": new_id})


def test_the_mcp_tools_answer_the_same_lines(atlas_mem: Memory) -> None:
    async def body(client: Client) -> dict[str, Any]:
        out: dict[str, Any] = {}
        res = await client.call_tool("memorize", {"text": "atlas ships on Fridays"})
        out["memorize"] = (text_of(res), res.structured_content["memory"])
        mid = res.structured_content["memory"]["id"]
        res = await client.call_tool("reflect", {"ids": [mid, 999999], "reward": 0.5})
        out["reflect"] = (text_of(res), res.structured_content)
        res = await client.call_tool("revise", {"memory_id": mid,
                                                "text": "atlas ships on Thursdays"})
        out["revise"] = (text_of(res), res.structured_content)
        res = await client.call_tool("forget", {"memory_id": res.structured_content["id"]})
        out["forget"] = (text_of(res), res.structured_content)
        return out

    out = run_with(atlas_mem, body)
    assert out["memorize"][0] == write_line(out["memorize"][1])
    assert out["reflect"][0] == reflect_line(out["reflect"][1])
    revised = out["revise"][1]
    assert out["revise"][0] == revise_line(revised["id"], revised["supersedes"])
    assert out["forget"][0] == forget_line(out["forget"][1])


def test_the_cli_keeps_no_copy_of_a_render_line() -> None:
    source = Path(tideline.cli.commands.__file__).read_text(encoding="utf-8")
    assert "_write_line" not in source
    for wording in ("supersedes #", "forgot memory", "; missing"):
        assert wording not in source, wording
