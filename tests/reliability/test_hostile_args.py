"""Hostile arguments on every public surface: only Tideline's typed errors escape (issue 9.8).

Reproducers from the issue: ``get(2**63)`` (and show/forget/reflect/revise/turns/
source_links) raised ``OverflowError``; ``inf`` → ``OverflowError``, ``NaN`` →
``ValueError``; ``recall(limit="abc")`` → ``ValueError``; ``events(limit=None)`` →
``TypeError``; ``events(kinds=["\\ud800"])`` → ``UnicodeEncodeError``; ``reflect(5, 0.5)``
→ ``TypeError``; JSONL ``turn_index`` 2**63 → ``OverflowError``; ``forget(1.5)`` deleted
memory 1 and ``get(1.9)`` returned it. 121 of 9,791 fuzzed API calls escaped the tree.

Every public method of :class:`Memory` and every MCP tool is driven with values drawn
from a hostile pool mixed with valid ones; the quick tier runs in the normal suite, the
``stress`` tier runs 50,000 examples for ``make stress`` and prints the figures.
"""

from __future__ import annotations

import inspect
import json
import re
import traceback
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio.from_thread
import pydantic_core
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import hashing

from mcp import Client
from tideline import Memory, TidelineError
from tideline.mcp.server import TOOL_NAMES, build_server
from tideline.project import ProjectInfo

NAN, INF = float("nan"), float("inf")
# Values the issue and RELIABILITY.md name, plus the usual suspects of each type.
HOSTILE: list[Any] = [
    None, True, False, 0, -1, 1.5, 1.9, 2.0, 2**63, -(2**63) - 1, 10**30, NAN, INF, -INF,
    1e20, "", " ", "abc", "1", "1.5", "-1", "\x00", "\ud800", "x" * 5000, "global", "fact",
    [], [1.5], [2**63], [True], ["\ud800"], [None], [[1]], ["1"], {}, {"a": 1},
    {"\ud800": 1}, b"bytes", ("x",), object(), datetime(1, 1, 1), "0001-01-01",
    "2024-01-01T00:00+25:00", "1e20", "NaN", "inf",
]
JSON_HOSTILE: list[Any] = [v for v in HOSTILE if isinstance(
    v, type(None) | bool | int | float | str | list | dict)]

# A valid value for each parameter name, so that a call gets past its first check.
VALID: dict[str, Any] = {
    "text": "the orchard exports run nightly", "gesture": "we moved the exports to 02:00",
    "query": "orchard exports", "ids": [1], "memory_id": 1, "thread_id": 1,
    "reward": 0.5, "limit": 5, "scope": "atlas", "project": "atlas", "kind": "fact",
    "src": 2, "dst": 1, "action": "keep_both", "keep": None,
    "tags": ["ops"], "source_links": None, "event_time": "2024-05-08T12:00Z",
    "importance": 3, "emotional": 2, "recurrence": 1, "unresolved": 1,
    "idempotency_key": None, "source": "api", "context": "standup",
    "cognition_direction": "toward cron", "entities_role": "", "related_entities": None,
    "turns": [{"session": "s1", "role": "user", "text": "when do exports run?"}],
    "session": "s1", "since": "2000-01-01", "until": "2100-01-01", "include_turns": True,
    "abstain": False, "tier": "recall", "log": False, "kinds": ["write"], "days": 30,
    "top": 5, "all_scopes": False, "gap_minutes": 30, "max_turns": 100, "status": "open",
    "title": "why are exports slow", "body": "", "source_memories": None,
    "entity": "mira", "facet": "fact", "content": "Mira runs the orchard team",
    "expected_version": None, "budget": 500, "tiers": ["T0", "T3"], "recent": "session",
    "around": 0, "radius": 2, "repair": False, "progress": None, "paths": None,
    "path": "missing.jsonl", "tool_results": False, "layer": "comb", "payload": "{}",
    "answer": "{}", "dry_run": True, "force": False, "settings": None, "only": "scan",
    "wait_s": 0.0, "layers": None, "provider": None, "model": None, "url": None,
    "command": None, "embedder": "hashing", "info": ProjectInfo("atlas", "explicit", "atlas"),
    "home": None, "namespace": None, "config": None, "database": None,
    "all_namespaces": False, "format": "jsonl", "vectors": True, "reembed": False,
    "batch": 100, "to": "migrated",
}
# Methods the drive table does not call: none. `close` and `open` are called too.
SKIP_PARAMS = {"self"}


def _store(home: Path) -> Memory:
    mem = Memory.open(home, embedder=hashing())
    mem.use_project(ProjectInfo("atlas", "explicit", "atlas"))
    return mem


def _seed(mem: Memory) -> None:
    if mem.introspect()["memories"] >= 3:
        return
    turns = mem.add_turns([{"session": "s1", "role": "user", "text": "when do exports run?"},
                           {"session": "s1", "role": "assistant", "text": "at 02:00"}],
                          scope="atlas")
    mem.remember("the orchard exports run nightly at 02:00", scope="atlas",
                 source_links=list(turns.turn_ids))
    mem.remember("Mira prefers short answers", kind="preference")
    mem.remember("the loader fails with E1234 on a new column", scope="atlas")


def public_methods() -> list[str]:
    """Every public callable and settable property of the facade."""
    out = []
    for name in dir(Memory):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(Memory, name)
        if isinstance(attr, property):
            if attr.fset is not None:
                out.append(name)
        elif callable(getattr(Memory, name)):
            out.append(name)
    return sorted(out)


def _params(name: str) -> list[str]:
    attr = inspect.getattr_static(Memory, name)
    if isinstance(attr, property):
        return ["value"]
    sig = inspect.signature(getattr(Memory, name))
    return [p for p, spec in sig.parameters.items()
            if p not in SKIP_PARAMS and spec.kind is not inspect.Parameter.VAR_KEYWORD]


hostile = st.one_of(
    st.sampled_from(HOSTILE),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=30),
    st.lists(st.sampled_from(HOSTILE), max_size=3),
)


class Driver:
    """Calls one facade method with a drawn argument list; counts what escapes."""

    def __init__(self, home: Path, tmp: Path) -> None:
        self.home, self.tmp = home, tmp
        self.mem = _store(home)
        _seed(self.mem)
        self.examples = 0
        self.typed = 0
        self.escapes: list[str] = []

    def call(self, method: str, args: dict[str, Any], extra: dict[str, Any]) -> None:
        self.examples += 1
        try:
            self._call(method, args, extra)
        except TidelineError:
            self.typed += 1
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            self.escapes.append(f"{method}({_short(args)}, {_short(extra)}) -> "
                                f"{type(exc).__name__}: {str(exc)[:200]} "
                                f"at {Path(where.filename).name}:{where.lineno}")

    def _call(self, method: str, args: dict[str, Any], extra: dict[str, Any]) -> None:
        if method == "open":
            args = dict(args)
            if args.get("home") is None:
                args["home"] = self.home
            if isinstance(args.get("home"), str):  # keep stray stores inside the test dir
                args["home"] = self.tmp / "other" / args["home"][:20].replace("/", "_")
            if args.get("embedder") in (None, "hashing"):
                args["embedder"] = hashing()
            Memory.open(**args).close()
            return
        if method == "close":
            self.mem.close()
            self.mem = _store(self.home)
            return
        if method == "inject_tuning":
            self.mem.inject_tuning = args["value"]
            return
        if method == "reembed" and args.get("embedder") == "hashing":
            args = dict(args, embedder=hashing())
        getattr(self.mem, method)(**args, **extra)
        if self.mem.introspect()["memories"] < 3:
            _seed(self.mem)

    def close(self) -> None:
        self.mem.close()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 200 else text[:197] + "..."


VALID_EXTRA = {"inject_tuning": None}


@st.composite
def facade_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any], dict[str, Any]]:
    method = draw(st.sampled_from(public_methods()))
    args: dict[str, Any] = {}
    for p in _params(method):
        sig_default = _default(method, p)
        choice = draw(st.sampled_from(["valid", "hostile", "hostile", "omit"]))
        if choice == "omit" and sig_default is not inspect.Parameter.empty:
            continue
        if choice == "valid" and p in VALID and method != "inject_tuning":
            args[p] = VALID[p]
        else:
            args[p] = draw(hostile)
    extra: dict[str, Any] = {}
    if method == "revise" and draw(st.booleans()):
        field = draw(st.sampled_from(["context", "kind", "tags", "importance", "event_time",
                                      "source_links", "bogus"]))
        extra[field] = draw(hostile)
    return method, args, extra


def _default(method: str, param: str) -> Any:
    attr = inspect.getattr_static(Memory, method)
    if isinstance(attr, property):
        return inspect.Parameter.empty
    return inspect.signature(getattr(Memory, method)).parameters[param].default


@pytest.fixture
def driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Driver]:
    # Defaults that read the user's machine (~/.claude, $HERMES_HOME) point into tmp_path.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes"))
    monkeypatch.setenv("TIDELINE_HOME", str(tmp_path / "default-store"))
    for var in ("TIDELINE_DREAM_PROVIDER", "TIDELINE_DREAM_COMMAND", "TIDELINE_EMBEDDER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    d = Driver(tmp_path / "store", tmp_path)
    try:
        yield d
    finally:
        d.close()


def run_facade_fuzz(d: Driver, examples: int) -> dict[str, Any]:
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(facade_calls())
    def body(call: tuple[str, dict[str, Any], dict[str, Any]]) -> None:
        d.call(*call)

    body()
    with Memory.open(d.home, embedder=hashing()) as mem:
        doctor_ok = mem.doctor()["ok"]
    figures = {"test": "hostile_facade", "examples": d.examples, "typed_errors": d.typed,
               "escapes": len(d.escapes), "doctor_ok": doctor_ok}
    print(json.dumps(figures))
    return figures


def test_every_public_method_is_driven() -> None:
    """A new public method must get a valid value for each parameter here."""
    missing = {f"{m}.{p}" for m in public_methods() for p in _params(m)
               if p not in VALID and m != "inject_tuning"}
    assert not missing, f"add valid values for {sorted(missing)}"
    assert {"recall", "forget", "get", "open", "close", "inject_tuning"} <= set(
        public_methods())


def test_hostile_arguments_raise_only_typed_errors(driver: Driver) -> None:
    f = run_facade_fuzz(driver, 600)
    assert f["escapes"] == 0, "\n".join(driver.escapes[:20])
    assert f["doctor_ok"]


@pytest.mark.stress
def test_hostile_arguments_stress(driver: Driver) -> None:
    f = run_facade_fuzz(driver, 50_000)
    assert f["escapes"] == 0, "\n".join(driver.escapes[:20])
    assert f["doctor_ok"]


# -- the issue's own reproducers, one by one -----------------------------------------------

@pytest.mark.parametrize("bad", [1.5, 1.9, 1.0, True, "1", " 1", 2**63, -1, 0, NAN, INF, None,
                                 [1], b"1"])
def test_ids_are_never_truncated(mem: Memory, bad: Any) -> None:
    """`forget(1.5)` deleted memory 1 and `get(1.9)` returned it; `get(2**63)` overflowed."""
    first = mem.remember("the orchard exports run nightly").id
    assert first == 1
    for call in (mem.get, mem.show, mem.forget, lambda v: mem.revise(v, "changed"),
                 lambda v: mem.turns([v]), lambda v: mem.reflect([v], 0.5),
                 lambda v: mem.remember("other", source_links=[v]),
                 lambda v: mem.read_context(memory_id=v), mem.close_thread):
        with pytest.raises(TidelineError) as info:
            call(bad)
        assert info.value.code in ("invalid_input", "input_too_large"), call
    assert mem.get(1).gesture == "the orchard exports run nightly"
    assert mem.introspect()["memories"] == 1


REPRODUCERS = [
    "m.recall('x', limit='abc')", "m.recall('x', limit=2.5)", "m.recall('x', limit=INF)",
    "m.events(limit=None)", "m.events(limit=-1)", "m.events(kinds=['\\ud800'])",
    "m.events(kinds=[5])", "m.reflect(5, 0.5)", "m.reflect([1], NAN)", "m.reflect([1], INF)",
    "m.reflect('12', 0.5)", "m.attention_heatmap(days=INF)", "m.attention_heatmap(days='30')",
    "m.read_context(session='s', around=2**63)", "m.read_context(query='x', radius=1.5)",
    "m.inject_brief(budget=NAN)", "m.add_turns([{'text': 'x', 'turn_index': 2**63}])",
    "m.add_turns([{'text': 'x', 'timestamp': NAN}])", "m.add_turns(5)",
    "m.topics(limit=None)", "m.report(days=1.5)", "m.sleep(wait_s=NAN)",
    "m.import_claude([5])", "m.update_profile('mira', 'fact', 'x', expected_version=1.5)",
]


@pytest.mark.parametrize("call", REPRODUCERS)
def test_the_issues_reproducers_are_typed(mem: Memory, call: str) -> None:
    """Each of these raised TypeError/ValueError/OverflowError/UnicodeEncodeError before."""
    mem.remember("the orchard exports run nightly")
    with pytest.raises(TidelineError):
        eval(call, {"m": mem, "NAN": NAN, "INF": INF})  # noqa: S307  # fixed test expressions


def test_jsonl_turn_index_out_of_range_is_typed(mem: Memory, tmp_path: Path) -> None:
    """JSONL `turn_index` 2**63 raised OverflowError."""
    chat = tmp_path / "c.jsonl"
    chat.write_text(json.dumps({"text": "x", "turn_index": 2**63}) + "\n", encoding="utf-8")
    with pytest.raises(TidelineError, match="turn_index"):
        mem.import_jsonl(chat)


# -- MCP: every tool through the SDK's in-memory client ------------------------------------

_CODED = re.compile(r"^[a-z][a-z_]+: \S")


class McpDriver:
    """One in-memory client session, driven from synchronous Hypothesis examples."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self.examples = 0
        self.escapes: list[str] = []
        self.codes: dict[str, int] = {}
        self.unsendable = 0

    def check(self, portal: Any, client: Client, tool: str, args: dict[str, Any]) -> None:
        self.examples += 1
        try:
            pydantic_core.to_json(args)
        except (ValueError, UnicodeError):  # the client itself cannot send this (a lone
            self.unsendable += 1            # surrogate as a key): no server is involved
            return
        try:
            res = portal.call(client.call_tool, tool, args)
        except Exception as exc:  # a protocol error instead of a tool error
            self.escapes.append(f"{tool}({_short(args)}) raised {type(exc).__name__}: {exc}")
            return
        if not res.is_error:
            return
        text = "\n".join(getattr(c, "text", "") for c in res.content)
        code = text.split(":", 1)[0]
        self.codes[code] = self.codes.get(code, 0) + 1
        err = (res.structured_content or {}).get("error", {})
        problems = []
        if not _CODED.match(text) or code == "internal":
            problems.append("not a typed <code>: <message>")
        if "pydantic" in text or "http" in text or "validation error" in text:
            problems.append("library internals in the message")
        if err.get("code") != code:
            problems.append("structured content lacks the code")
        if problems:
            self.escapes.append(f"{tool}({_short(args)}) -> {problems}: {text[:300]}")


def _tool_args(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    props = schema.get("properties", {})
    for name in props:
        choice = draw(st.sampled_from(["valid", "hostile", "omit", "omit"]))
        if choice == "omit":
            continue
        if choice == "valid" and name in VALID and _json_ok(VALID[name]):
            args[name] = VALID[name]
        else:
            args[name] = draw(st.one_of(
                st.sampled_from(JSON_HOSTILE), st.integers(min_value=-(2**70), max_value=2**70),
                st.floats(), st.text(max_size=20),
                st.lists(st.sampled_from(JSON_HOSTILE), max_size=3)))
    if draw(st.integers(0, 9)) == 0:
        args[draw(st.sampled_from(["bogus", "memoryId", "Limit"]))] = 1
    return args


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def run_mcp_fuzz(mem: Memory, examples: int) -> dict[str, Any]:
    _seed(mem)
    d = McpDriver(mem)

    with anyio.from_thread.start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(Client(build_server(mem))) as client:
        tools = {t.name: t.input_schema for t in portal.call(client.list_tools).tools}
        assert set(tools) == set(TOOL_NAMES)

        @settings(max_examples=examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.data())
        def body(data: st.DataObject) -> None:
            tool = data.draw(st.sampled_from(sorted(tools)))
            args = data.draw(st.composite(lambda draw: _tool_args(draw, tools[tool]))())
            d.check(portal, client, tool, args)

        body()
    figures = {"test": "hostile_mcp", "examples": d.examples, "escapes": len(d.escapes),
               "unsendable": d.unsendable, "codes": d.codes}
    print(json.dumps(figures))
    return figures | {"examples_failed": d.escapes[:20]}


def test_mcp_tools_answer_hostile_arguments_with_typed_errors(mem: Memory) -> None:
    f = run_mcp_fuzz(mem, 300)
    assert f["escapes"] == 0, "\n".join(f["examples_failed"])
    assert "invalid_input" in f["codes"]


@pytest.mark.stress
def test_mcp_hostile_arguments_stress(mem: Memory) -> None:
    f = run_mcp_fuzz(mem, 50_000)
    assert f["escapes"] == 0, "\n".join(f["examples_failed"])
