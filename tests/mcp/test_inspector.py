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
