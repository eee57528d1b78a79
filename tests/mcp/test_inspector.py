"""The MCP Inspector CLI (`@modelcontextprotocol/inspector`, pinned in package.json, installed
into ./node_modules by `make test`)
calls `memorize` then `recall` on `tideline serve` and gets the memory back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import node_tool


def inspector(store: Path, cwd: Path, *args: str) -> dict:
    env = dict(os.environ)
    proc = subprocess.run(
        [node_tool("mcp-inspector"), "--cli",
         "-e", f"TIDELINE_HOME={store}", "-e", "TIDELINE_EMBEDDER=hashing",
         sys.executable, "-m", "tideline", "serve", "--scope", "orchard", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_inspector_memorize_then_recall(tmp_path: Path) -> None:
    store = tmp_path / "store"
    listed = inspector(store, tmp_path, "--method", "tools/list")
    assert {"recall", "memorize", "reflect"} <= {t["name"] for t in listed["tools"]}
    wrote = inspector(store, tmp_path, "--method", "tools/call", "--tool-name", "memorize",
                      "--tool-arg", "text=orchard exports run nightly at 02:00 via cron")
    assert wrote["isError"] is False
    assert wrote["structuredContent"]["memory"]["decision"] == "new"
    got = inspector(store, tmp_path, "--method", "tools/call", "--tool-name", "recall",
                    "--tool-arg", "query=when do orchard exports run")
    assert got["isError"] is False
    items = got["structuredContent"]["items"]
    assert items and items[0]["id"] == wrote["structuredContent"]["memory"]["id"]
    assert "02:00" in items[0]["text"]
    assert got["content"][0]["text"].startswith("<tideline-recalled-data")
    assert (store / "tideline.db").exists()


def call(store: Path, cwd: Path, tool: str, *args: str) -> dict:
    flags = [f for a in args for f in ("--tool-arg", a)]
    return inspector(store, cwd, "--method", "tools/call", "--tool-name", tool, *flags)


def test_inspector_sees_each_error_code_as_documented(tmp_path: Path) -> None:
    """Issue 10.10: validation errors were raw pydantic text with a URL and no code.

    One error of each code a client can cause with a tool's arguments, each as
    `<code>: <message>` with the structured `{"error": {"code", ...}}` beside it.
    """
    store = tmp_path / "store"
    listed = inspector(store, tmp_path, "--method", "tools/list")
    for tool in listed["tools"]:
        assert tool.get("outputSchema", {}).get("type") == "object", tool["name"]
        props = tool["inputSchema"].get("properties", {})
        assert all(p.get("description") for p in props.values()), tool["name"]
    call(store, tmp_path, "update_profile", "entity=mira", "facet=fact",
         "content=Mira runs the orchard team")
    cases = {
        "invalid_input": ("recall", "query=orchard", "limit=abc"),
        "input_too_large": ("memorize", "text=" + "x" * 20_000),
        "not_found": ("forget", "memory_id=424242"),
        "conflict": ("update_profile", "entity=mira", "facet=fact", "content=changed",
                     "expected_version=7"),
        "llm_output_invalid": ("apply_dream", "layer=comb", "answer={}"),
    }
    for code, (tool, *args) in cases.items():
        got = call(store, tmp_path, tool, *args)
        text = got["content"][0]["text"]
        assert got["isError"] is True, (code, got)
        assert text.startswith(f"{code}: "), (code, text)
        assert "pydantic" not in text and "http" not in text, text
        assert got["structuredContent"]["error"]["code"] == code
    text = call(store, tmp_path, "recall", "query=orchard", "limit=abc")["content"][0]["text"]
    assert text == "invalid_input: recall: limit must be an integer"
