"""Issue 11 on the new store shape: the methods every backend offers (store/__init__.py,
store/base.py), the shared views over the ``?``-translating connection, and the
surfaces above the facade (MCP, the Claude Code hooks) on a real PostgreSQL server."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.conftest import hashing
from tests.hooks.conftest import SESSION, run_hook_process, write_transcript
from tests.mcp.conftest import run_with, text_of

from mcp import Client
from tideline import Memory
from tideline.models import LexicalQuery
from tideline.project import ProjectInfo
from tideline.store import open_store, peek_gate, peek_meta
from tideline.store.consolidation import ConsolidationStore


def test_open_store_routes_a_url_to_postgresql(pg_url: str, tmp_path: Path) -> None:
    store = open_store(tmp_path / "local", "default", "hashing:x/8", database=pg_url)
    try:
        info = store.describe()
        assert info["backend"] == store.backend == "postgresql"
        assert info["database"].startswith("postgresql://")
        assert info["schema_version"] >= 1 and info["bytes"] > 0
        # The server keeps its own backups: no file on this host.
        assert store.backup("probe", keep=2) is None
        assert not (tmp_path / "local" / "backups").exists()
        assert store.vectors_pending() is False
    finally:
        store.close()
    assert peek_meta(tmp_path / "elsewhere", "embedder", database=pg_url) == "hashing:x/8"
    # Nothing authoritative on the host: no SQLite file was made.
    assert not (tmp_path / "local" / "tideline.db").exists()


def test_events_recalls_and_eligibility_share_the_views(pg_mem: Memory) -> None:
    """log_event returns the id; record_recall and eligibility run their portable SQL."""
    first = pg_mem.store.log_event(None, "probe", {"n": 1})
    second = pg_mem.store.log_event(None, "probe", {"n": 2})
    assert second > first
    mid = pg_mem.write("the kiln runs at 1200 degrees", kind="fact").id
    cons = ConsolidationStore(pg_mem.store)
    rid = cons.record_recall({"scope": "global", "tier": "test"}, [(mid, 0.9, 0.8)], "test",
                             time.time())
    assert rid > second
    assert pg_mem.events(kinds=["recall"], limit=1)[0]["id"] == rid
    assert [(e[1], e[2], e[3], e[6]) for e in cons.eligibility()] == [(rid, mid, 0, "global")]


def test_search_by_terms_and_the_gate(pg_mem: Memory, pg_url: str, tmp_path: Path) -> None:
    mid = pg_mem.write("the loader died with errE4521x at night", kind="fact").id
    words = pg_mem.store.search_memories(LexicalQuery(text="loader"), substrings=False,
                                         scopes=["global"], limit=5)
    sub = pg_mem.store.search_memories(LexicalQuery(text="E4521"), substrings=True,
                                       scopes=["global"], limit=5)
    assert [k for k, _ in words] == [k for k, _ in sub] == [mid]
    for text in ['NEAR(loader', 'body:loader', '"', '*', "- ^", "\x00"]:
        found = pg_mem.store.search_memories(LexicalQuery(text=text), substrings=False,
                                             scopes=["global"], limit=5)
        assert {k for k, _ in found} <= {mid}
    pg_mem.add_turns([{"session": "s1", "role": "user", "text": "the psycopg2-binary wheel"}])
    turns = pg_mem.store.search_turns(LexicalQuery(text="psycopg"), substrings=True,
                                      scopes=["global"], limit=5)
    assert len(turns) == 1
    pg_mem.sleep(force=True)
    view = peek_gate(tmp_path / "another-host", "default", database=pg_url)
    assert view is not None and view.stored == view.marker
    assert pg_mem.sleep()["skipped"] is True


def test_doctor_pending_and_reembed_through_the_store(pg_mem: Memory) -> None:
    pg_mem.write("a memory to check", kind="fact")
    report = pg_mem.doctor()
    assert report["ok"], report
    filled = pg_mem.store.fill_pending(lambda texts: None)
    assert filled == {"filled": 0, "left": 0}
    assert pg_mem.doctor(repair=True)["ok"]


def test_mcp_tools_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    """memorize then recall through the official SDK client, the memory on the server."""
    mem = Memory.open(tmp_path / "local", database=pg_url, embedder=hashing())
    mem.use_project(ProjectInfo("atlas", "git_root", str(tmp_path)))

    async def body(c: Client) -> tuple[str, str]:
        m = await c.call_tool("memorize", {"text": "atlas runs PostgreSQL 16 on pg-atlas-01",
                                           "kind": "fact"})
        r = await c.call_tool("recall", {"query": "which PostgreSQL does atlas use"})
        return text_of(m), text_of(r)

    try:
        stored, recalled = run_with(mem, body)
        assert mem.store.backend == "postgresql"
        assert mem.introspect()["memories"] == 1
    finally:
        mem.close()
    assert "pg-atlas-01" in recalled, (stored, recalled)


def test_claude_code_hooks_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    """The hooks as processes: the brief read from the database (no numpy), the stop
    hook's turns stored there, another host's facade sees them."""
    store = tmp_path / "host-a"
    project = tmp_path / "atlas"
    (project / ".git").mkdir(parents=True)
    with Memory.open(tmp_path / "host-b", database=pg_url, embedder=hashing(),
                     project="atlas") as m:
        m.write("We fixed loader error E1234 by mapping the region column", scope="atlas",
                importance=5, emotional=4, recurrence=4, unresolved=2)
    base = {"session_id": SESSION, "transcript_path": str(project / "t.jsonl"),
            "cwd": str(project), "permission_mode": "default"}
    start = run_hook_process("session-start", {**base, "hook_event_name": "SessionStart",
                                               "source": "startup"},
                             store, cwd=project, probe=True, TIDELINE_DATABASE_URL=pg_url)
    assert start.returncode == 0, start.stderr
    assert start.stderr.strip().endswith("HEAVY="), start.stderr
    assert "E1234" in json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    write_transcript(project / "t.jsonl", project)
    stop = run_hook_process("stop", {**base, "hook_event_name": "Stop",
                                     "stop_hook_active": False},
                            store, cwd=project, TIDELINE_DATABASE_URL=pg_url)
    assert stop.returncode == 0 and stop.stdout == "", stop.stderr
    assert not (store / "tideline.db").exists()
    with Memory.open(tmp_path / "host-b", database=pg_url, embedder=hashing()) as m:
        kept = m.read_context(session=SESSION, limit=50, scope="atlas")["turns"]
        assert {t["message_id"] for t in kept} == {"u-1", "a-2", "a-4"}
        assert [e["kind"] for e in m.events(kinds=["inject"], limit=5, all_scopes=True)] == [
            "inject"]


def test_the_read_views_run_on_postgresql(pg_mem: Memory) -> None:
    """Report, attention, scan, topics, entity graph, self-model and the brief: the
    shared views' portable SQL through the ``?``-translating connection."""
    mid = pg_mem.write("Mira reviews the atlas schema every friday", kind="fact",
                       related_entities=["Mira"], entities_role="Mira=reviewer",
                       tags=["atlas"]).id
    pg_mem.add_turns([{"session": "s1", "role": "user", "speaker": "Mira",
                       "text": "the atlas schema review is on friday"}])
    pg_mem.recall("atlas schema", include_turns=True)
    pg_mem.sleep(force=True)
    assert pg_mem.report(days=7)["totals"]["memories"] == 1
    assert pg_mem.attention_heatmap(days=7, all_scopes=True)["total_hits"] >= 1
    assert "Unindexed context" in pg_mem.scan_unindexed(gap_minutes=1, all_scopes=True).markdown
    assert isinstance(pg_mem.topics(all_scopes=True), list)
    graph = pg_mem.entity_graph()
    assert [n["entity"] for n in graph["nodes"]] == ["Mira"], graph
    pg_mem.update_profile("Mira", "fact", "reviews schemas")
    pg_mem.update_self_concept("reflection", "careful reviews")
    tid = pg_mem.add_thread("atlas review", "follow the friday review", source_memories=[mid])
    assert [t["id"] for t in pg_mem.threads()] == [tid]
    assert "Mira" in str(pg_mem.profiles())
    brief = pg_mem.inject_brief(session="s1")
    assert "atlas" in brief.text
