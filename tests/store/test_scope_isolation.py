"""Scopes never leak: every read by id or by search answers only from its project and global.

Issue 9 item 5 (``read_context`` ignored scope) and the "Scope on every read" rule of
RELIABILITY.md: an id of another project is ``NotFound``, exactly as if it did not
exist, on the Python API, the MCP tools, resources and prompts. On each backend
(tests/backend.py).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.backend import Backend, connection
from tests.conftest import hashing
from tests.mcp.conftest import run_with, text_of

from mcp import Client
from tideline import Memory, NotFound
from tideline.mcp.server import DREAM_LAYERS
from tideline.project import ProjectInfo

SCOPES = ("alpha", "beta", "gamma", "global")
PROJECTS = ("alpha", "beta", "gamma")

pytestmark = pytest.mark.backends
WORDS = ("heron", "kiln", "otter", "comet", "E1234", "边界", "délai")
READS = ("recall", "get", "show", "turns", "reflect", "revise", "forget", "ctx_memory",
         "ctx_query", "ctx_session")

_op = st.tuples(
    st.sampled_from(["remember", "turn", "linked", "sleep", *READS]),
    st.sampled_from(SCOPES),
    st.sampled_from(WORDS),
    st.integers(min_value=0, max_value=10_000),
)


class World:
    """What was written, by whom: every item carries a unique marker word."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self.memories: dict[int, str] = {}
        self.turns: dict[int, str] = {}
        self.markers: dict[str, str] = {}  # marker → scope

    def marker(self, n: int, scope: str) -> str:
        word = f"mk{n}q{scope}"
        self.markers[word] = scope
        return word

    def hidden_markers(self, reader: str) -> list[str]:
        return [m for m, s in self.markers.items() if s not in (reader, "global")]


def _not_found_like_absent(mem: Memory, call: Any, mid: int) -> None:
    """A hidden id raises NotFound with the very message an absent id gets."""
    with pytest.raises(NotFound) as hidden:
        call(mid)
    with pytest.raises(NotFound) as absent:
        call(10**9)
    assert str(hidden.value) == str(absent.value).replace(str(10**9), str(mid))


def _check_read(w: World, op: str, reader: str, word: str, pick: int, n: int) -> None:
    mem = w.mem
    visible = (reader, "global")
    ids = sorted(w.memories)
    target = ids[pick % len(ids)] if ids else None
    own = target is not None and w.memories[target] in visible
    if op == "recall":
        packet = mem.recall(f"{word} note", scope=reader, abstain=False, limit=50)
        for item in packet.items:
            assert item.scope in visible
            if item.type == "memory":
                assert w.memories[int(item.id)] in visible
            else:  # a turn item's id is the source's message id
                assert w.turns[int(item.turn_id or 0)] in visible
    elif op == "ctx_query":
        res = mem.read_context(query=word, scope=reader, limit=50)
        assert all(w.turns[int(t["turn_id"])] in visible for t in res["turns"])
    elif op == "ctx_session":
        for around in (None, pick % 4):
            res = mem.read_context(session=f"s{pick % 2}", around=around, scope=reader)
            assert all(w.turns[int(t["id"])] in visible for t in res["turns"])
    elif op == "turns":
        got = mem.turns(sorted(w.turns), scope=reader)
        assert {t.id for t in got} == {t for t, s in w.turns.items() if s in visible}
    elif target is None:
        return
    elif op == "reflect":
        res = mem.reflect([target], 0.5, scope=reader)
        assert (res["updated"], res["missing"]) == (([target], []) if own else ([], [target]))
    elif not own:
        calls = {
            "get": lambda i: mem.get(i, scope=reader),
            "show": lambda i: mem.show(i, scope=reader),
            "ctx_memory": lambda i: mem.read_context(memory_id=i, scope=reader),
            "revise": lambda i: mem.revise(i, f"{word} revised", scope=reader),
            "forget": lambda i: mem.forget(i, scope=reader),
        }
        _not_found_like_absent(mem, calls[op], target)
        assert target in mem.store.get_memories([target])  # untouched
    elif op == "get":
        assert mem.get(target, scope=reader).scope in visible
    elif op == "show":
        shown = mem.show(target, scope=reader)
        assert all(w.turns[t["id"]] in visible for t in shown["turns"])
        assert all(w.memories[h["id"]] in visible for h in shown["history"])
        for e in shown["edges"]:
            assert w.memories[e["src"]] in visible and w.memories[e["dst"]] in visible
    elif op == "ctx_memory":
        res = mem.read_context(memory_id=target, radius=2, scope=reader)
        for window in res["turns"]:
            assert w.turns[window["turn"]["id"]] in visible
            assert all(w.turns[t["id"]] in visible for t in window["window"])
    elif op == "revise":
        if mem.get(target, scope=reader).status != "superseded":
            res = mem.revise(target, f"{word} revised {w.marker(n, w.memories[target])}",
                             scope=reader)
            w.memories[res.id] = w.memories[target]
    elif op == "forget":
        mem.forget(target, scope=reader)
        del w.memories[target]


def _mcp_reads(mem: Memory, reader: str, ids: list[int]) -> list[str]:
    """Everything an MCP client of project ``reader`` can read: resources and prompts."""
    mem.use_project(ProjectInfo(reader, "explicit", reader))

    async def body(c: Client) -> list[str]:
        out: list[str] = []
        for uri in ("tideline://memory-map", "tideline://profiles", "tideline://self-concept"):
            out.append((await c.read_resource(uri)).contents[0].text)
        for mid in ids:
            try:
                out.append((await c.read_resource(f"tideline://memory/{mid}")).contents[0].text)
            except Exception as exc:  # the SDK raises the coded error
                assert "not_found" in str(exc), exc
        for layer in DREAM_LAYERS:
            prompt = await c.get_prompt(layer)
            out.extend(getattr(m.content, "text", "") for m in prompt.messages)
        for mid in ids:
            res = await c.call_tool("read_context", {"memory_id": mid})
            out.append(text_of(res) + json.dumps(res.structured_content or {}))
        # The journal, the store's statistics, the brief and attention (issue 33 item 3).
        for name, args in (("dream_log", {"limit": 1000}), ("introspect", {}), ("brief", {}),
                           ("attention_heatmap", {})):
            res = await c.call_tool(name, args)
            out.append(text_of(res) + json.dumps(res.structured_content or {}))
        return out

    return run_with(mem, body)


def _api_reads(mem: Memory, reader: str, report: bool) -> list[str]:
    """The journal, introspection and (``report``) the report through the Python API, as
    ``reader``."""
    mem.use_project(ProjectInfo(reader, "explicit", reader))
    out = [json.dumps(mem.events(limit=10_000), default=str),
           json.dumps(mem.introspect(), default=str)]
    if report:  # the costliest read: one reader per example, a different one each time
        out.append(json.dumps(mem.report(days=3), default=str))
    return out


def _first_mention(texts: str, words: list[str]) -> str:
    at = min(texts.find(w) for w in words)
    return texts[max(0, at - 200):at + 100]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(_op, min_size=1, max_size=30))
def test_scope_isolation_property(tmp_path_factory: pytest.TempPathFactory, backend: Backend,
                                  ops: list) -> None:
    """Random writes and reads from random projects: no read answers from another project.

    Covers recall, get, show, turns (source_links), reflect, revise, forget and the three
    ``read_context`` modes (issue 9 item 5's reproducers), then the MCP resources, the
    DREAM prompts and the read_context tool of each project; with sleeps among the
    writes, the journal (``events``, ``dream_log``), ``introspect``, the brief,
    attention and the report (issue 33 item 3), which may not even name another project.
    """
    home = tmp_path_factory.mktemp("iso")
    with backend.open(home, url=backend.fresh(), embedder=hashing()) as mem:
        backend.check(mem)
        w = World(mem)
        slept = False
        for n, (op, scope, word, pick) in enumerate(ops):
            if op == "remember":
                res = mem.remember(f"{word} note {n} in {w.marker(n, scope)}", scope=scope,
                                   idempotency_key=f"k{n}")
                w.memories[res.id] = scope
            elif op == "turn":
                # Two session names shared by every project: a name is no key across them.
                r = mem.add_turns([{"session": f"s{pick % 2}", "role": "user",
                                    "text": f"{word} turn {n} {w.marker(n, scope)}",
                                    "id": f"t{n}"}], scope=scope)
                w.turns.update({tid: scope for tid in r.turn_ids})
            elif op == "linked":
                # A write may cite its own scope's turns and global ones, never another
                # project's (issue 28 §2.1; the `two_projects` fixture keeps a global
                # memory citing two projects, for the reads that must filter it).
                links = [t for t in sorted(w.turns) if w.turns[t] in (scope, "global")
                         ][pick % 3::3][:3]
                res = mem.write(f"{word} linked {n} {w.marker(n, scope)}", scope=scope,
                                source_links=links, idempotency_key=f"k{n}")
                w.memories[res.id] = scope
            elif op == "sleep":  # topic labels and attention come from every project's words
                if not slept:  # once per example: a sleep costs more than all the reads
                    mem.sleep(force=True)
                slept = True
            else:
                _check_read(w, op, scope if scope != "global" else PROJECTS[pick % 3], word,
                            pick, n)
        ids = sorted(w.memories)
        for reader in PROJECTS:
            mcp = _mcp_reads(mem, reader, ids)
            texts = "\n".join(mcp)
            leaked = [m for m in w.hidden_markers(reader) if m in texts]
            assert leaked == [], (reader, leaked)
            # The journal, introspect and the report may not even name another project
            # (every marker of it holds its name, so no marker of it either).
            texts = "\n".join(_api_reads(mem, reader, reader == PROJECTS[len(ops) % 3])
                              + mcp[-4:])
            named = [p for p in PROJECTS if p != reader and p in texts]
            assert named == [], (reader, named, _first_mention(texts, named))


@pytest.fixture
def two_projects(mem: Memory) -> dict[str, Any]:
    """A memory and its turns in project B (session ``sB`` and the shared ``mcp``)."""
    turns = mem.add_turns([
        {"session": "sB", "role": "user", "text": "B turn text about zebra quartz", "id": "b1"},
        {"session": "sB", "role": "assistant", "text": "B reply on zebra quartz", "id": "b2"},
        {"session": "mcp", "role": "user", "text": "B says orchid basalt", "id": "b3"},
    ], scope="B")
    a_turns = mem.add_turns([{"session": "mcp", "role": "user", "text": "A says granite",
                              "id": "a1"}], scope="A")
    b = mem.write("B secret plan zebra quartz", scope="B", source_links=turns.turn_ids[:2])
    g = mem.write("global note linking both projects", scope="global")
    # No write may cite another project's turns any more (issue 28 §2.1); a global memory
    # that does (an older store, an archive) must still show each project only its own.
    cited = dataclasses.replace(mem.get(g.id), source_links=(*turns.turn_ids,
                                                             *a_turns.turn_ids))
    with connection(mem, write=True) as c:
        mem.store.update_memory(c, cited)
    return {"b": b.id, "g": g.id, "b_turns": turns.turn_ids, "a_turns": a_turns.turn_ids}


def test_read_context_answers_only_from_the_callers_scope(mem: Memory,
                                                          two_projects: dict[str, Any]) -> None:
    """Issue 9 item 5's reproducers: read_context(session="sB" / memory_id=<B's id> /
    query="B turn text", scope="A") returned B's text."""
    assert mem.read_context(session="sB", scope="A")["turns"] == []
    assert mem.read_context(session="sB", around=0, scope="A")["turns"] == []
    with pytest.raises(NotFound, match=f"no memory with id {two_projects['b']}$"):
        mem.read_context(memory_id=two_projects["b"], scope="A")
    found = mem.read_context(query="B turn text zebra quartz", scope="A")["turns"]
    assert all(t["scope"] == "A" for t in found) and not any("zebra" in t["text"] for t in found)
    # The shared session name shows only A's turn from A.
    shared = mem.read_context(session="mcp", scope="A")["turns"]
    assert [t["text"] for t in shared] == ["A says granite"]
    # B itself still reads all of it.
    assert len(mem.read_context(session="sB", scope="B")["turns"]) == 2
    assert mem.read_context(memory_id=two_projects["b"], scope="B")["linked"] == 2
    # A global memory linking turns of both projects shows A only A's turns.
    via_global = mem.read_context(memory_id=two_projects["g"], scope="A")
    assert [w["turn"]["text"] for w in via_global["turns"]] == ["A says granite"]
    assert all(t["scope"] == "A" for w in via_global["turns"] for t in w["window"])


def test_reads_and_writes_by_id_of_another_project_are_not_found(
        mem: Memory, two_projects: dict[str, Any]) -> None:
    """get/show/turns/reflect/revise/forget by another project's id: as if it did not exist."""
    b = two_projects["b"]
    for call in (lambda: mem.get(b, scope="A"), lambda: mem.show(b, scope="A"),
                 lambda: mem.revise(b, "rewritten from A", scope="A"),
                 lambda: mem.forget(b, scope="A")):
        with pytest.raises(NotFound, match=f"^no memory with id {b}$"):
            call()
    assert mem.turns(two_projects["b_turns"], scope="A") == []
    assert mem.reflect([b], 1.0, scope="A") == {"updated": [], "missing": [b], "reward": 1.0}
    kept = mem.get(b, scope="B")
    assert (kept.status, kept.version, kept.reinforcements) == ("episodic", 1, 0)
    shown = mem.show(two_projects["g"], scope="A")
    assert [t["text"] for t in shown["turns"]] == ["A says granite"]


def test_mcp_tools_and_resources_keep_to_the_servers_project(
        mem: Memory, two_projects: dict[str, Any]) -> None:
    """The MCP surface of project A: B's ids are not_found, B's turns are never shown."""
    mem.use_project(ProjectInfo("A", "explicit", "A"))
    b = two_projects["b"]

    async def body(c: Client) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, args in (("read_context", {"memory_id": b}), ("forget", {"memory_id": b}),
                           ("revise", {"memory_id": b, "text": "x"})):
            res = await c.call_tool(name, args)
            out[name] = (res.is_error, text_of(res))
        out["reflect"] = (await c.call_tool("reflect", {"ids": [b]})).structured_content
        out["session"] = text_of(await c.call_tool("read_context", {"session": "sB"}))
        out["query"] = text_of(await c.call_tool("read_context", {"query": "zebra quartz"}))
        try:
            await c.read_resource(f"tideline://memory/{b}")
            out["resource"] = "read"
        except Exception as exc:  # the SDK raises the coded JSON-RPC error
            out["resource"] = str(exc)
        out["own"] = (await c.call_tool("read_context", {"memory_id": b, "project": "B"}))
        return out

    out = run_with(mem, body)
    for name in ("read_context", "forget", "revise"):
        assert out[name][0] is True and out[name][1].startswith("not_found:"), out[name]
    assert out["reflect"]["missing"] == [b]
    assert "zebra" not in out["session"] and "zebra" not in out["query"]
    assert "not_found" in out["resource"]
    assert "zebra quartz" in text_of(out["own"])
    assert mem.get(b, scope="B").version == 1


def test_read_context_tool_prints_each_linked_turn_once(mem: Memory) -> None:
    """Issue 10 item 10: `read_context memory_id=…` printed each linked turn twice."""
    turns = mem.add_turns([{"session": "s", "role": "user", "text": f"line {i} of the talk",
                            "id": f"x{i}"} for i in range(5)])
    mid = mem.write("the talk", source_links=turns.turn_ids[1:3]).id

    async def body(c: Client) -> str:
        return text_of(await c.call_tool("read_context", {"memory_id": mid, "radius": 2}))

    text = run_with(mem, body)
    for i in range(5):
        assert text.count(f"line {i} of the talk") == 1, text
    marked = [line for line in text.splitlines() if line.startswith("> ")]
    assert len(marked) == 2 and "line 1" in marked[0] and "line 2" in marked[1]


def test_brief_bridge_keeps_to_the_project_when_session_names_repeat(
        mem: Memory, two_projects: dict[str, Any]) -> None:
    """T2b and the T1 recent turns read one session of the project, never the same-named
    session of another project (the MCP default session is ``mcp`` everywhere)."""
    brief = mem.inject_brief(scope="A", tiers=("T2b",)).text
    assert "A says granite" in brief and "orchid" not in brief
    prefetch = mem.inject_prefetch("granite", scope="A", session="mcp", recent="session",
                                   log=False).text
    assert "orchid" not in prefetch


def test_hermes_tools_keep_to_the_detected_project(
        store_dir: Any, two_projects: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hermes plugin's tools in project A: B's ids are missing, B's text never recalled."""
    from tideline.plugins.hermes import TidelineMemoryProvider

    monkeypatch.setenv("TIDELINE_PROJECT", "A")
    provider = TidelineMemoryProvider(store=store_dir, embedder="hashing")
    provider.initialize("h-1", agent_context="primary")
    try:
        assert provider.memory.project == "A"
        b = two_projects["b"]
        reflected = json.loads(provider.handle_tool_call("tideline_reflect",
                                                         {"ids": [b], "reward": 1}))
        assert reflected["missing"] == [b] and reflected["updated"] == []
        recalled = json.loads(provider.handle_tool_call("tideline_recall",
                                                        {"query": "zebra quartz"}))
        assert all(i["scope"] in ("A", "global") for i in recalled["items"])
        assert "B secret" not in recalled["text"] and "B turn" not in recalled["text"]
    finally:
        provider.shutdown()


def test_comb_prompt_attention_keeps_to_the_project(mem: Memory) -> None:
    """Found by the property test: the comb prompt's "most recalled" list named memories
    of every project, so project beta's prompt showed alpha's recalled memory."""
    from tideline.dream.prompts import render_prompt

    mem.remember("heron note 0 in mk0qalpha", scope="alpha")
    mem.remember("heron note 1 in mk1qbeta", scope="beta")
    mem.recall("heron note", scope="alpha", abstain=False)
    assert "mk0qalpha" not in render_prompt(mem, "comb", scope="beta")
    assert "mk0qalpha" in render_prompt(mem, "comb", scope="alpha")
