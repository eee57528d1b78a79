"""docs/agents.md documents every MCP tool, resource, prompt, hook and agent command."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from tideline.hooks.claude import EVENTS
from tideline.mcp.server import DREAM_LAYERS, TOOL_NAMES

DOC = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text("utf-8")


def test_every_tool_resource_prompt_and_hook_is_documented() -> None:
    for name in TOOL_NAMES:
        assert f"`{name}`" in DOC, name
    for uri in ("tideline://memory-map", "tideline://profiles", "tideline://self-concept",
                "tideline://identity", "tideline://memory/{memory_id}"):
        assert uri in DOC, uri
    for layer in DREAM_LAYERS:
        assert f"`{layer}`" in DOC, layer
    for event in EVENTS:
        assert f"tideline hook {event}" in DOC, event
    for command in ("tideline serve", "tideline install claude", "tideline uninstall claude",
                    "tideline install hermes", "tideline import claude", "tideline import hermes",
                    "tideline import jsonl"):
        assert command in DOC, command


def test_config_blocks_parse() -> None:
    blocks = re.findall(r"```(\w+)\n(.*?)```", DOC, flags=re.S)
    parsed = 0
    for lang, body in blocks:
        if lang == "json":
            json.loads(body)
            parsed += 1
        elif lang == "toml":
            assert tomllib.loads(body)["mcp_servers"]["tideline"]["args"] == ["serve"]
            parsed += 1
    assert parsed >= 4
