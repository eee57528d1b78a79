"""The MCP server through the SDK's in-memory client: tools, resources, prompts, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from tests.mcp.conftest import run_with, text_of

from mcp import Client
from tideline import Memory
from tideline.mcp.server import DREAM_LAYERS, INSTRUCTIONS, TOOL_NAMES
from tideline.render import FENCE_CLOSE, FENCE_OPEN

pytestmark = pytest.mark.backends


def test_tools_are_listed_with_when_to_call_descriptions(atlas_mem: Memory) -> None:
    async def body(c: Client) -> Any:
        return (await c.list_tools()).tools

    tools = run_with(atlas_mem, body)
    by_name = {t.name: t for t in tools}
    assert set(TOOL_NAMES) == set(by_name)
    for t in tools:
        assert t.description and len(t.description) > 60
        assert t.input_schema["type"] == "object"
    assert "BEFORE" in by_name["recall"].description
    assert "AFTER" in by_name["memorize"].description
    assert by_name["recall"].annotations.read_only_hint is True
    assert by_name["forget"].annotations.destructive_hint is True
    assert {"text", "gesture", "turns", "scope"} <= set(by_name["memorize"].input_schema[
        "properties"])
    assert "recall" in INSTRUCTIONS and "memorize" in INSTRUCTIONS and "reflect" in INSTRUCTIONS


def test_memorize_recall_reflect_revise_forget(atlas_mem: Memory) -> None:
    async def body(c: Client) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["init"] = c.server_info
        m = await c.call_tool("memorize", {"text": "atlas runs PostgreSQL 16 on pg-atlas-01",
                                           "tags": ["pg"], "importance": 4})
        out["memorize"] = m
        out["again"] = await c.call_tool("memorize", {
            "text": "atlas runs PostgreSQL 16 on pg-atlas-01."})
        out["global"] = await c.call_tool("memorize", {"text": "the user prefers short answers",
                                                       "kind": "preference", "scope": "global"})
        out["narrative"] = await c.call_tool("memorize", {
            "gesture": "We chose PgBouncer session mode, relieved",
            "context": "standup after the outage", "cognition_direction": "toward pooling",
            "importance": 5, "emotional": 3,
            "turns": [{"role": "user", "text": "should we pool connections?", "id": "u1"},
                      {"role": "assistant", "text": "yes, PgBouncer in session mode",
                       "id": "a1"}]})
        out["recall"] = await c.call_tool("recall", {"query": "which PostgreSQL does atlas use"})
        mid = m.structured_content["memory"]["id"]
        out["reflect"] = await c.call_tool("reflect", {"ids": [mid], "reward": 0.5})
        out["revise"] = await c.call_tool("revise", {"memory_id": mid,
                                                     "text": "atlas runs PostgreSQL 17"})
        new_id = out["revise"].structured_content["id"]
        out["context"] = await c.call_tool("read_context", {
            "memory_id": out["narrative"].structured_content["memory"]["id"]})
        out["forget"] = await c.call_tool("forget", {"memory_id": new_id})
        out["forgotten"] = await c.call_tool("forget", {"memory_id": new_id})
        return out

    out = run_with(atlas_mem, body)
    assert out["init"].name == "tideline"
    mem = out["memorize"].structured_content["memory"]
    assert mem["decision"] == "new" and mem["scope"] == "atlas"
    assert out["again"].structured_content["memory"]["decision"] == "potentiate"
    assert out["global"].structured_content["memory"]["scope"] == "global"
    narrative = out["narrative"].structured_content
    assert narrative["turns"]["inserted"] == 2
    stored = atlas_mem.get(narrative["memory"]["id"])
    assert stored.kind == "narrative" and len(stored.source_links) == 2
    assert stored.context == "standup after the outage"
    rec = out["recall"]
    assert not rec.is_error
    assert rec.structured_content["items"][0]["id"] == mem["id"]
    text = text_of(rec)
    assert text.startswith(FENCE_OPEN) and text.endswith(FENCE_CLOSE)
    assert "pg-atlas-01" in text
    assert out["reflect"].structured_content["updated"] == [mem["id"]]
    assert "supersedes" in text_of(out["revise"])
    ctx = out["context"].structured_content
    assert ctx["mode"] == "memory" and ctx["linked"] == 2
    assert "PgBouncer in session mode" in text_of(out["context"])
    assert not out["forget"].is_error
    gone = out["forgotten"]
    assert gone.is_error and gone.structured_content["error"]["code"] == "not_found"
    assert gone.structured_content["error"]["jsonrpc_code"] == -32602
    assert text_of(gone).startswith("not_found:")
    assert "Traceback" not in text_of(gone)


def test_errors_are_coded_never_tracebacks(atlas_mem: Memory) -> None:
    async def body(c: Client) -> list[Any]:
        return [
            await c.call_tool("memorize", {}),
            await c.call_tool("memorize", {"text": "x\x00y"}),
            await c.call_tool("recall", {"query": "q" * 5000}),
            await c.call_tool("read_context", {"memory_id": 1, "query": "both"}),
            await c.call_tool("update_profile", {"entity": "bob", "facet": "fact",
                                                 "content": "Bob", "expected_version": 7}),
            await c.call_tool("memorize", {"text": "ok", "source_links": [999999]}),
            await c.call_tool("recall", {"query": "x", "limit": 100000}),
        ]

    res = run_with(atlas_mem, body)
    codes = [r.structured_content["error"]["code"] if r.structured_content else None
             for r in res]
    assert codes[:6] == ["invalid_input", "invalid_input", "input_too_large", "invalid_input",
                         "conflict", "invalid_input"]
    assert res[6].is_error  # schema validation by the SDK: a message, not a traceback
    assert all(r.is_error and "Traceback" not in text_of(r) for r in res)


def test_project_argument_scopes_recall(atlas_mem: Memory) -> None:
    atlas_mem.remember("orchard deploys on fridays", scope="orchard")
    atlas_mem.remember("atlas deploys on mondays", scope="atlas")

    async def body(c: Client) -> tuple[Any, Any]:
        here = await c.call_tool("recall", {"query": "deploys"})
        there = await c.call_tool("recall", {"query": "deploys", "project": "orchard"})
        return here, there

    here, there = run_with(atlas_mem, body)
    assert {i["scope"] for i in here.structured_content["items"]} <= {"atlas", "global"}
    assert {i["scope"] for i in there.structured_content["items"]} <= {"orchard", "global"}
    assert "fridays" in text_of(there) and "fridays" not in text_of(here)


def test_introspect_journal_attention_brief_profiles(atlas_mem: Memory, tmp_path: Path) -> None:
    (tmp_path / "store" / "SOUL.md").write_text("I am the atlas agent.", encoding="utf-8")

    async def body(c: Client) -> dict[str, Any]:
        await c.call_tool("memorize", {"text": "atlas nightly job exports CSV", "tags": ["csv"]})
        await c.call_tool("memorize", {"text": "kafka keeps seven days", "tags": ["kafka"]})
        await c.call_tool("recall", {"query": "atlas nightly CSV export"})
        return {
            "introspect": await c.call_tool("introspect", {}),
            "log": await c.call_tool("dream_log", {"kinds": ["write", "recall"], "limit": 5}),
            "heat": await c.call_tool("attention_heatmap", {}),
            "brief": await c.call_tool("brief", {"budget": 600}),
            "profile": await c.call_tool("update_profile", {
                "entity": "alice", "facet": "fact", "content": "Alice owns the loader."}),
            "profiles": await c.call_tool("read_profiles", {}),
            "self": await c.call_tool("update_self_concept", {
                "facet": "reflection", "content": "I over-index on databases."}),
            "selfread": await c.call_tool("read_self_concept", {}),
        }

    out = run_with(atlas_mem, body)
    info = out["introspect"].structured_content
    assert info["project"] == "atlas" and info["project_rule"] == "git_root"
    assert info["project_detection"]["rule"] == "git_root"
    assert info["embedder"]["name"] == "hashing" and info["memories"] == 2
    assert info["identity"].endswith("SOUL.md")
    kinds = {e["kind"] for e in out["log"].structured_content["events"]}
    assert kinds <= {"write", "recall"} and "recall" in kinds
    heat = out["heat"].structured_content
    by_tag = heat["by_tag"]  # sleep has not clustered anything yet: tags stand in
    assert by_tag["hits"] >= 1 and {g["label"] for g in by_tag["lit"]} == {"csv"}
    assert {g["label"] for g in by_tag["deserts"]} == {"kafka"}
    assert "lit: csv" in text_of(out["heat"]) and "desert: kafka" in text_of(out["heat"])
    brief = out["brief"].structured_content
    assert brief["tokens"] <= 600 and set(brief["tier_tokens"]) == {"T0", "T2", "T2b", "T3"}
    assert "I am the atlas agent." in text_of(out["brief"])
    assert out["profile"].structured_content["version"] == 1
    assert out["profiles"].structured_content["profiles"][0]["entity"] == "alice"
    assert out["selfread"].structured_content["self_concept"][0]["facet"] == "reflection"
    assert FENCE_OPEN in text_of(out["profiles"])


def test_read_context_query_and_session(atlas_mem: Memory) -> None:
    atlas_mem.add_turns([
        {"session": "s1", "role": "user", "text": "loader fails with E1234", "id": "m1",
         "timestamp": "2026-11-20T09:00:00Z"},
        {"session": "s1", "role": "assistant", "text": "a new CSV column caused it", "id": "m2",
         "timestamp": "2026-11-20T09:01:00Z"},
    ], scope="atlas", source="claude")

    async def body(c: Client) -> tuple[Any, Any, Any]:
        return (await c.call_tool("read_context", {"query": "E1234"}),
                await c.call_tool("read_context", {"session": "s1"}),
                await c.call_tool("read_context", {"session": "s1", "around": 0, "radius": 0}))

    q, s, w = run_with(atlas_mem, body)
    assert q.structured_content["turns"][0]["message_id"] == "m1"
    assert [t["message_id"] for t in s.structured_content["turns"]] == ["m1", "m2"]
    assert [t["message_id"] for t in w.structured_content["turns"]] == ["m1"]
    assert "2026-11-20T09:00" in text_of(s)


def test_resources_and_prompts(atlas_mem: Memory, tmp_path: Path) -> None:
    atlas_mem.remember("atlas runs PostgreSQL 16", scope="atlas", tags=["pg"])
    atlas_mem.update_profile("alice", "fact", "Alice owns the loader.")
    atlas_mem.update_self_concept("fact", "I am a careful agent.")

    async def body(c: Client) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["list"] = [str(r.uri) for r in (await c.list_resources()).resources]
        out["templates"] = [t.uri_template for t in
                            (await c.list_resource_templates()).resource_templates]
        for uri in ("tideline://memory-map", "tideline://profiles", "tideline://self-concept",
                    "tideline://memory/1"):
            out[uri] = (await c.read_resource(uri)).contents[0].text
        try:
            await c.read_resource("tideline://identity")
        except MCPError as exc:
            out["identity_error"] = exc
        (tmp_path / "store" / "SOUL.md").write_text("# Soul\nCurious.", encoding="utf-8")
        out["identity"] = (await c.read_resource("tideline://identity")).contents[0].text
        try:
            await c.read_resource("tideline://memory/999")
        except MCPError as exc:
            out["missing"] = exc
        out["prompts"] = [p.name for p in (await c.list_prompts()).prompts]
        return out

    out = run_with(atlas_mem, body)
    assert {"tideline://memory-map", "tideline://profiles", "tideline://self-concept",
            "tideline://identity"} <= set(out["list"])
    assert "tideline://memory/{memory_id}" in out["templates"]
    assert "pg(1)" in out["tideline://memory-map"]
    assert "Alice owns the loader." in out["tideline://profiles"]
    assert "careful agent" in out["tideline://self-concept"]
    assert '"gesture": "atlas runs PostgreSQL 16"' in out["tideline://memory/1"]
    assert out["identity_error"].error.data["code"] == "not_found"
    assert out["identity"].startswith("# Soul")
    assert out["missing"].error.code == -32602 and out["missing"].error.data["code"] == "not_found"
    assert out["prompts"] == list(DREAM_LAYERS)


def test_dream_prompts_render_from_the_store(atlas_mem: Memory) -> None:
    atlas_mem.add_turns([{"session": "s1", "role": "user", "id": "x1",
                          "text": "the loader broke on error E1234 again"}], scope="atlas")
    atlas_mem.remember("atlas uses PostgreSQL 16", scope="atlas")

    async def body(c: Client) -> dict[str, Any]:
        return {layer: await c.get_prompt(layer) for layer in DREAM_LAYERS}

    out = run_with(atlas_mem, body)
    for layer, result in out.items():
        assert result.messages and result.messages[0].content.text.strip(), layer
    assert "E1234" in out["solidify"].messages[0].content.text  # the scanner's output


def test_agent_driven_dream_through_apply_dream(atlas_mem: Memory) -> None:
    a = atlas_mem.remember("the deploy moved to Tuesday", scope="atlas").id
    b = atlas_mem.remember("Deniz reviews every atlas deploy", scope="atlas").id
    answer = {
        "symbols": [{"symbol": "calendar", "memory_ids": [a]},
                    {"symbol": "key", "memory_ids": [b]},
                    {"symbol": "door", "memory_ids": [a, b]}],
        "story": "A door opens only on Tuesdays; Deniz holds the key.",
        "reflection": "Waiting for review shapes the week.", "importance": 5,
        "emotional": 2, "recurrence": 1, "unresolved": 2}

    async def body(c: Client) -> Any:
        import json

        prompt = await c.get_prompt("dream")
        bad = await c.call_tool("apply_dream", {"layer": "dream", "answer": "{not json"})
        good = await c.call_tool("apply_dream", {"layer": "dream", "answer": json.dumps(answer)})
        return prompt, bad, good

    prompt, bad, good = run_with(atlas_mem, body)
    assert prompt.messages
    assert bad.is_error
    assert not good.is_error
    dreams = atlas_mem.store.list_memories(kind="dream")
    assert len(dreams) == 1 and dreams[0].importance == 1
