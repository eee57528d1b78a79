"""One argument rule for every MCP tool, the Hermes plugin and the facade.

Issue 28 §2.2: ``read_context`` took ``memory_id`` ``"6"`` and ``6.0``; ``recall``
took ``limit`` ``"5"``, ``true`` and ``5.0``; ``reflect`` took ``reward`` ``"1"``.
Issue 33 item 10: ``memorize``/``revise``/``read_context`` refused text that happened
to be valid JSON and read the text ``"null"`` as absent; malformed stdio JSON-RPC
messages got no reply at all. Each is checked here through the real client (the
official SDK's in-memory ``Client``, and ``tideline serve`` over real pipes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import hashing
from tests.mcp.conftest import text_of

from mcp import Client
from tideline import Memory
from tideline.errors import InvalidInput
from tideline.mcp.server import build_server
from tideline.plugins.hermes import _arguments
from tideline.tools import TOOLS


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    m = Memory.open(tmp_path_factory.mktemp("rule") / "s", embedder=hashing(),
                    project="atlas")
    m.write("atlas deploys run on Fridays", scope="atlas")
    try:
        yield m
    finally:
        m.close()


def call(mem: Memory, tool: str, args: Mapping[str, Any]) -> Any:
    async def main() -> Any:
        async with Client(build_server(mem)) as client:
            return await client.call_tool(tool, dict(args))
    return anyio.run(main)


def _valid(schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "string":
        return schema.get("enum", ["atlas"])[0]
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    return "atlas"


def _base(tool: str) -> dict[str, Any]:
    """The tool's required arguments, each a valid value of its type."""
    return {p.name: _valid(p.schema) for p in TOOLS[tool].params if p.required}


#: (tool, parameter, JSON type) of every integer, number and boolean parameter.
TYPED = [(name, p.name, p.schema["type"]) for name, tool in TOOLS.items()
         for p in tool.params if p.schema.get("type") in ("integer", "number", "boolean")]


def _wrong(kind: str) -> st.SearchStrategy[Any]:
    """Values a lax reader would coerce into ``kind`` but JSON says are something else."""
    numeric_text = st.integers(1, 5).map(str) | st.sampled_from(["1.0", "true", " 3 "])
    if kind == "integer":
        return numeric_text | st.booleans() | st.integers(1, 5).map(float)
    if kind == "number":
        return numeric_text | st.booleans()
    return st.sampled_from(["true", "false", "1", "0", 1, 0])  # boolean


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(TYPED).flatmap(
    lambda c: st.tuples(st.just(c), _wrong(c[2]))))
def test_every_typed_parameter_takes_its_json_type_only(mem: Memory,
                                                        case: tuple[Any, Any]) -> None:
    (tool, param, _kind), value = case
    before = mem.introspect()["memories"]
    args = _base(tool) | {param: value}
    got = call(mem, tool, args)
    assert got.is_error, (tool, param, value, text_of(got))
    assert text_of(got).startswith(f"invalid_input: {tool}: {param} must be "), text_of(got)
    assert mem.introspect()["memories"] == before


@pytest.mark.parametrize(("tool", "args", "param"), [
    ("read_context", {"memory_id": "1"}, "memory_id"),
    ("read_context", {"memory_id": 1.0}, "memory_id"),
    ("recall", {"query": "deploys", "limit": "5"}, "limit"),
    ("recall", {"query": "deploys", "limit": True}, "limit"),
    ("recall", {"query": "deploys", "limit": 5.0}, "limit"),
    ("reflect", {"ids": [1], "reward": "1"}, "reward"),
    ("reflect", {"ids": ["1"]}, "ids.0"),
    ("memorize", {"text": "x", "importance": 4.0}, "importance"),
])
def test_the_issues_reproducers_are_refused(mem: Memory, tool: str, args: dict[str, Any],
                                            param: str) -> None:
    got = call(mem, tool, args)
    assert got.is_error and text_of(got).startswith(f"invalid_input: {tool}: {param} must be")
    assert got.structured_content["error"]["code"] == "invalid_input"


def test_the_published_schema_is_the_checked_one(mem: Memory) -> None:
    """Optional integers are published as integers (a form-filling client such as the
    MCP Inspector then sends ``7``, not ``"7"``), exactly as the catalogue has them."""
    async def main() -> Any:
        async with Client(build_server(mem)) as client:
            return (await client.list_tools()).tools
    for tool in anyio.run(main):
        assert tool.input_schema == TOOLS[tool.name].input_schema(), tool.name


_JSONISH = st.sampled_from(["null", "true", "42", "-1.5", "[]", "{}", '"quoted"',
                            '["a", "b"]', '{"a": 1}', "[1, 2, 3]"])


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_JSONISH | st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6).map(json.dumps))
def test_text_that_is_valid_json_is_stored_as_text(mem: Memory, text: str) -> None:
    # A scope of its own per text: the novelty gate must not merge two of them.
    scope = f"j{abs(hash(text)) % 10**12}"
    got = call(mem, "memorize", {"text": text, "scope": scope})
    if not text.strip():
        return
    assert not got.is_error, text_of(got)
    stored = mem.get(got.structured_content["memory"]["id"], scope=scope)
    assert stored.gesture == text.strip()


def test_null_text_is_text_in_memorize_revise_and_read_context(mem: Memory) -> None:
    wrote = call(mem, "memorize", {"text": "null", "scope": "nulls"})
    assert not wrote.is_error, text_of(wrote)
    mid = wrote.structured_content["memory"]["id"]
    assert mem.get(mid, scope="nulls").gesture == "null"
    revised = call(mem, "revise", {"memory_id": mid, "text": '{"state": "done"}',
                                   "project": "nulls"})
    assert not revised.is_error, text_of(revised)
    assert mem.get(revised.structured_content["id"], scope="nulls").gesture == \
        '{"state": "done"}'
    read = call(mem, "read_context", {"query": "null"})
    assert not read.is_error and read.structured_content["mode"] == "query"


def test_json_null_still_means_absent_where_the_default_is_absent(mem: Memory) -> None:
    got = call(mem, "read_context", {"memory_id": None, "query": "deploys"})
    assert not got.is_error and got.structured_content["mode"] == "query"
    got = call(mem, "recall", {"query": "deploys", "limit": None})
    assert text_of(got) == "invalid_input: recall: limit must be an integer"


@pytest.mark.parametrize(("tool", "args"), [
    ("tideline_recall", {"query": "deploys", "limit": "5"}),
    ("tideline_recall", {"query": "deploys", "limit": 5.0}),
    ("tideline_reflect", {"ids": [1], "reward": "1"}),
    ("tideline_reflect", {"ids": [1.0], "reward": 1}),
])
def test_hermes_reads_arguments_by_the_same_rule(tool: str, args: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput, match="must be"):
        _arguments(tool, args)


def test_the_facade_refuses_a_fractional_weight_like_mcp(mem: Memory) -> None:
    with pytest.raises(InvalidInput, match="importance must be an integer"):
        mem.write("weights are integers", scope="atlas", importance=4.0)  # type: ignore[arg-type]


def test_malformed_stdio_messages_get_a_json_rpc_error(tmp_path: Path) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "probe", "version": "1"}}}
    bad = ['not json', '{"jsonrpc": "2.0", "id": 2, "method": "tools/list"',  # cut short
           '[1, 2]', '42', '{"jsonrpc": "2.0", "id": 3}', '{"id": 4, "method": "tools/list"}',
           '{"jsonrpc": "2.0", "id": 5, "method": 7}',
           '{"jsonrpc": "2.0", "id": "six", "method": "tools/call", "params": "x"}']
    lines = [json.dumps(init), json.dumps({"jsonrpc": "2.0",
                                           "method": "notifications/initialized"}),
             *bad, "", json.dumps({"jsonrpc": "2.0", "id": 99, "method": "tools/list"})]
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing", TIDELINE_HOME=str(tmp_path / "s"))
    # stdin stays open until the last answer is in: at end of input the server may stop
    # before it answers what is still queued (seen under load), which is not the point here.
    proc = subprocess.Popen([sys.executable, "-m", "tideline", "serve", "--scope", "atlas"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env, cwd=tmp_path)
    assert proc.stdin is not None and proc.stdout is not None
    replies: list[dict[str, object]] = []
    watchdog = threading.Timer(120, proc.kill)  # a server that never answers fails, not hangs
    watchdog.start()
    try:
        proc.stdin.write("\n".join(lines) + "\n")
        proc.stdin.flush()
        for line in proc.stdout:
            if line.strip():
                replies.append(json.loads(line))
            if replies and replies[-1].get("id") == 99:
                break
    finally:
        watchdog.cancel()
        proc.stdin.close()
        proc.wait(timeout=120)
    assert [r.get("id") for r in replies] == [1, None, None, None, None, 3, 4, 5, "six", 99]
    errors = [r["error"]["code"] for r in replies[1:-1]]
    assert errors == [-32700, -32700, -32600, -32600, -32600, -32600, -32600, -32600]
    assert replies[-1]["result"]["tools"]  # the session goes on
