"""One tool catalogue (``tideline.tools``) behind the MCP server and the Hermes plugin.

Issue 11 ("one tool catalogue for MCP and the Hermes plugin (today their recall limits
differ, 200 vs 50)"): each surface spelled its tools out itself, so Hermes' recall took
at most 50 items and MCP's 200, with different wording. Now both read one catalogue,
and these tests compare what each surface really publishes: the MCP schemas as the SDK
derives them from the server's signatures, and Hermes' ``get_tool_schemas()``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.mcp.conftest import run_with

from mcp import Client
from tideline import Memory
from tideline.config import Caps
from tideline.errors import TidelineError
from tideline.plugins.hermes import HERMES_TOOLS, TOOL_SCHEMAS, TidelineMemoryProvider
from tideline.tools import ID_MAX, TOOLS
from tideline.write.validate import INT64_MAX


def _plain(schema: Any, defs: dict[str, Any]) -> Any:
    """A pydantic-made schema in the catalogue's form: refs inlined, no titles, no null."""
    if isinstance(schema, list):
        return [_plain(s, defs) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return _plain(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    out = {k: _plain(v, defs) for k, v in schema.items() if k != "title"}
    if "anyOf" in out and {"type": "null"} in out["anyOf"]:
        alts = [a for a in out.pop("anyOf") if a != {"type": "null"}]
        out = {**alts[0], **out} if len(alts) == 1 else {**out, "anyOf": alts}
    if "default" in out and out["default"] is None:
        del out["default"]
    return out


@pytest.fixture(scope="module")
def mcp_tools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.conftest import hashing

    mem = Memory.open(tmp_path_factory.mktemp("catalogue") / "s", embedder=hashing(),
                      project="global")
    try:
        async def body(client: Client) -> Any:
            return (await client.list_tools()).tools

        tools = run_with(mem, body)
    finally:
        mem.close()
    return {t.name: t for t in tools}


def test_the_mcp_server_publishes_the_catalogue(mcp_tools: dict[str, Any]) -> None:
    assert list(mcp_tools) == list(TOOLS)
    for name, tool in TOOLS.items():
        got = mcp_tools[name]
        assert got.description == tool.description, name
        schema = got.input_schema
        props = {k: _plain(v, schema.get("$defs", {})) for k, v in
                 schema.get("properties", {}).items()}
        assert props == {p.name: p.json_schema() for p in tool.params}, name
        assert schema.get("required", []) == [p.name for p in tool.params if p.required]


def test_hermes_offers_the_same_tools_with_the_same_parameters(
        mcp_tools: dict[str, Any]) -> None:
    """The reproducer: `tideline_recall`'s limit went to 50, MCP `recall`'s to 200."""
    assert [s["name"] for s in TOOL_SCHEMAS] == [h[0] for h in HERMES_TOOLS]
    for schema, (_name, tool, _params, _required) in zip(TOOL_SCHEMAS, HERMES_TOOLS,
                                                         strict=True):
        mcp = mcp_tools[tool]
        assert schema["description"] == mcp.description
        defs = mcp.input_schema.get("$defs", {})
        for pname, prop in schema["parameters"]["properties"].items():
            assert prop == _plain(mcp.input_schema["properties"][pname], defs), (tool, pname)
        assert set(schema["parameters"]["required"]) <= set(
            schema["parameters"]["properties"])
    recall = {s["name"]: s for s in TOOL_SCHEMAS}["tideline_recall"]
    limit = recall["parameters"]["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, Caps().limit, 8)


def test_catalogue_bounds_are_the_facades() -> None:
    assert ID_MAX == INT64_MAX
    assert TOOLS["recall"].param("limit").maximum == Caps().limit
    assert TOOLS["read_context"].param("limit").maximum == Caps().limit


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Any:
    store: Path = tmp_path_factory.mktemp("hermes") / "store"
    with Memory.open(store, embedder="hashing", project="global") as mem:
        mem.remember("the orchard export runs at 02:00", scope="global")
    prov = TidelineMemoryProvider(store=store, embedder="hashing")
    prov.initialize("hs-limits")
    yield prov
    prov.shutdown()


def _call(provider: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(provider.handle_tool_call(tool, args))
    return out


@pytest.mark.parametrize("limit", [0, -1, 201, "5", 2.5, 8.0, True, [3], {"n": 1}])
def test_hermes_limits_are_checked_like_the_facades(provider: Any, limit: Any) -> None:
    """``int(args.get("limit") or 8)`` read 0 as 8, "5" as 5 and 2.5 as 2."""
    answer = _call(provider, "tideline_recall", {"query": "orchard export", "limit": limit})
    assert answer["error"]["code"] in ("invalid_input", "input_too_large"), answer
    assert "limit" in answer["error"]["message"]


def test_hermes_takes_the_largest_limit_and_the_default(provider: Any) -> None:
    assert "items" in _call(provider, "tideline_recall", {"query": "orchard", "limit": 200})
    assert "items" in _call(provider, "tideline_recall", {"query": "orchard", "limit": None})
    bad = _call(provider, "tideline_memorize", {"text": "x", "importance": 9})
    assert bad["error"]["code"] == "invalid_input" and "importance" in bad["error"]["message"]
    bad = _call(provider, "tideline_reflect", {"ids": [1], "reward": "0.5"})
    assert bad["error"]["code"] == "invalid_input" and "reward" in bad["error"]["message"]
    assert _call(provider, "tideline_memorize", {"text": None})["error"]["code"] == (
        "invalid_input")
    assert _call(provider, "tideline_recall", ["orchard"])["error"]["code"] == "invalid_input"


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70)
                     | st.floats(allow_nan=True) | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=2), max_leaves=3)


@settings(max_examples=80, deadline=None)
@given(limit=_JSON)
def test_hermes_accepts_a_limit_exactly_when_the_facade_and_the_schema_do(
        provider: Any, limit: Any) -> None:
    answer = _call(provider, "tideline_recall", {"query": "orchard", "limit": limit})
    try:
        provider.memory.recall("orchard", limit=limit if limit is not None else 8)
        facade_ok = True
    except TidelineError:
        facade_ok = False
    in_schema = limit is None or (type(limit) is int and 1 <= limit <= 200)
    assert ("error" not in answer) == (facade_ok and in_schema), (limit, answer)
