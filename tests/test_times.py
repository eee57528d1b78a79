"""Times: range-checked where they enter, never able to break a read once stored (issue 9.1).

Reproducer from the issue (``TIDELINE_EMBEDDER=hashing``): ``tideline remember x
--event-time 1e20`` succeeded, and afterwards every recall that would return it failed
with ``OverflowError`` (CLI exit 70), MCP ``recall`` answered "internal", the prompt hook
injected nothing, the ``scan`` sleep step failed and ``doctor`` said ok.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.backend import run_all, scalar
from tests.conftest import hashing
from tests.mcp.conftest import run_with, text_of

from mcp import Client
from tideline import InvalidInput, Memory
from tideline.config import Config
from tideline.hooks.claude import run_hook
from tideline.times import MAX_TS, MIN_TS, clamped_time, iso, stored_time
from tideline.write.validate import parse_time

# Each of these is refused wherever a time enters (issue 9.1's list).
HOSTILE_TIMES: list[object] = [
    1e20, -1e20, 1e300, float("nan"), float("inf"), -float("inf"), 10**30, "1e20", "-1e20",
    "1e300", "NaN", "inf", "10000-01-01", "+10000-01-01T00:00", "2024-01-01T00:00+25:00",
    "May 8, 2023 13:56 +2500", "0001-01-01T00:00+01:00", "9999-12-31T23:59-05:00",
    MAX_TS + 1, MIN_TS - 1,
]


@pytest.mark.parametrize("value", HOSTILE_TIMES, ids=repr)
def test_a_time_that_is_no_real_instant_is_invalid_input(value: object) -> None:
    """`--event-time 1e20`, `0001-01-01` east of UTC, a `+25:00` offset: typed, never ValueError."""
    with pytest.raises(InvalidInput, match="not a date"):
        parse_time(value, "event_time")


def test_the_edges_of_the_range_are_accepted() -> None:
    """`--event-time 0001-01-01` used to fail with an untyped ValueError (issue 9.1)."""
    assert parse_time("0001-01-01T00:00:00Z") == MIN_TS
    assert parse_time("9999-12-31T23:59:59Z") == MAX_TS
    assert parse_time(datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)) == MAX_TS
    assert parse_time(MIN_TS) == MIN_TS and parse_time(MAX_TS) == MAX_TS
    assert parse_time(datetime(2024, 5, 8, 12, tzinfo=timezone(timedelta(hours=23)))) == \
        datetime(2024, 5, 7, 13, tzinfo=UTC).timestamp()
    assert iso(MIN_TS) == "0001-01-01T00:00:00+00:00"
    assert iso(MAX_TS) == "9999-12-31T23:59:59+00:00"


@given(st.one_of(st.floats(), st.integers(min_value=-(10**40), max_value=10**40),
                 st.datetimes(timezones=st.timezones()), st.text(max_size=40)))
@settings(max_examples=400, deadline=None)
def test_any_value_is_a_time_in_range_or_invalid_input(value: object) -> None:
    """Whatever comes in, parse_time answers a renderable instant or raises InvalidInput."""
    try:
        got = parse_time(value, "t")
    except InvalidInput:
        return
    if got is None:
        return
    assert math.isfinite(got) and MIN_TS <= got <= MAX_TS
    assert iso(got) is not None


@given(st.one_of(st.floats(), st.integers(), st.text(max_size=8), st.none(), st.booleans()))
def test_reading_a_stored_value_never_fails(value: object) -> None:
    """Whatever a row holds, reading it back skips (optional) or clamps (required) it."""
    got = stored_time(value)
    assert got is None or MIN_TS <= got <= MAX_TS
    assert MIN_TS <= clamped_time(value) <= MAX_TS
    iso(value)  # never raises


@pytest.mark.parametrize("value", [1e20, "1e20", "2024-01-01T00:00+25:00", "10000-01-01"])
def test_every_python_entry_refuses_it_and_writes_nothing(mem: Memory, value: object) -> None:
    """Event time, turn timestamps, since/until and revise all check the range."""
    keep = mem.remember("the orchard exports run nightly at 02:00").id
    with pytest.raises(InvalidInput):
        mem.remember("the heron colony moved", event_time=value)
    with pytest.raises(InvalidInput):
        mem.write("we moved the heron colony", event_time=value)
    with pytest.raises(InvalidInput):
        mem.add_turns([{"session": "s", "text": "hello", "timestamp": value}])
    with pytest.raises(InvalidInput):
        mem.recall("orchard", since=value)
    with pytest.raises(InvalidInput):
        mem.recall("orchard", until=value)
    with pytest.raises(InvalidInput):
        mem.revise(keep, event_time=value)
    stats = mem.introspect()
    assert stats["memories"] == 1 and stats["turns"] == 0


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing", TIDELINE_HOME=str(store))
    return subprocess.run([sys.executable, "-m", "tideline", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_cli_and_jsonl_import_refuse_it_with_exit_3(tmp_path: Path) -> None:
    """`tideline remember x --event-time 1e20` succeeded; `0001-01-01` / `+25:00` exited 70."""
    store = tmp_path / "s"
    for bad in ("1e20", "-1e20", "2024-01-01T00:00+25:00", "10000-01-01"):
        proc = _cli(store, "remember", "x", "--event-time", bad)
        assert proc.returncode == 3, proc.stderr
        assert proc.stderr.startswith("tideline: error: invalid_input: event_time")
    assert _cli(store, "recall", "x", "--since", "1e300").returncode == 3
    assert _cli(store, "remember", "y", "--event-time", "0001-01-01T00:00Z").returncode == 0
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(json.dumps(r) for r in [
        {"session": "s1", "text": "first", "timestamp": "2026-11-20T09:00:00Z", "id": "a"},
        {"session": "s1", "text": "second", "timestamp": 1e20, "id": "b"},
    ]) + "\n", encoding="utf-8")
    proc = _cli(store, "turns", "import", str(chat), "--json")
    assert proc.returncode == 3 and "timestamp" in proc.stderr, proc.stderr
    chat.write_text('{"session": "s1", "text": "third", "timestamp": 1e400}\n',
                    encoding="utf-8")  # json reads 1e400 as inf
    assert _cli(store, "turns", "import", str(chat)).returncode == 3
    with Memory.open(store, embedder=hashing()) as mem:
        assert mem.introspect()["turns"] == 0


def test_mcp_refuses_it_with_a_typed_error(mem: Memory) -> None:
    async def body(c: Client) -> list[Any]:
        return [
            await c.call_tool("memorize", {"text": "x happened", "event_time": "1e20"}),
            await c.call_tool("recall", {"query": "x", "since": "10000-01-01"}),
            await c.call_tool("memorize", {"turns": [{"text": "hi", "timestamp": 1e300}]}),
        ]

    for res in run_with(mem, body):
        assert res.is_error
        assert text_of(res).startswith("invalid_input: ")
        assert res.structured_content["error"]["code"] == "invalid_input"


def _poison(mem: Memory) -> None:
    """What today's code let in, written with raw SQL: impossible times in every column."""
    # SQLite only: its loose column types let a text time in, PostgreSQL's refuse it.
    run_all(mem, [("UPDATE memories SET event_time = 1e20 WHERE id = 1", ()),
                  ("UPDATE memories SET event_time = -1e300 WHERE id = 2", ()),
                  ("UPDATE memories SET event_time = 9e999, last_access = 1e300 WHERE id = 3",
                   ()),
                  ("UPDATE turns SET ts = 1e20 WHERE message_id = 't1'", ()),
                  ("UPDATE turns SET ts = 'soon' WHERE message_id = 't2'", ()),
                  ("UPDATE turns SET ts = -9e999 WHERE message_id = 't3'", ())])


def _seed(home: Path) -> None:
    with Memory.open(home, embedder=hashing(), project="global") as mem:
        mem.remember("the orchard exports run nightly at 02:00 via cron")
        mem.remember("the orchard dashboard shows export failures in red")
        mem.remember("orchard export retries are capped at three")
        mem.add_turns([
            {"session": "s1", "role": "user", "text": "when do the orchard exports run?",
             "id": "t1"},
            {"session": "s1", "role": "assistant", "text": "the orchard exports run at 02:00",
             "id": "t2"},
            {"session": "s1", "role": "user", "text": "and the orchard retries?", "id": "t3"},
        ])
        _poison(mem)


def test_a_store_with_impossible_times_opens_and_every_read_answers(tmp_path: Path) -> None:
    """Issue 9.1: one `1e20` made recall, MCP recall, the prompt hook and `scan` fail."""
    home = tmp_path / "s"
    _seed(home)
    with Memory.open(home, embedder=hashing(), project="global") as mem:
        packet = mem.recall("orchard exports", limit=10)
        assert {i.id for i in packet.items if i.type == "memory"} == {1, 2, 3}
        assert all(i.event_time is None for i in packet.items)
        assert mem.recall("orchard", since="2000-01-01", until="2100-01-01").items
        assert "orchard" in mem.scan_unindexed().markdown
        assert mem.show(1)["event_time"] is None
        assert mem.get(3).last_access == MAX_TS
        assert mem.inject_brief().text
        assert "orchard" in mem.inject_prefetch("when do the orchard exports run").text
        assert len(mem.read_context(session="s1")["turns"]) == 3
        assert mem.read_context(query="orchard retries")["turns"]
        json.dumps(mem.report())
        slept = mem.sleep(force=True)
        assert slept["errors"] == {}, slept["errors"]

        async def body(c: Client) -> Any:
            return await c.call_tool("recall", {"query": "orchard exports"})

        res = run_with(mem, body)
        assert not res.is_error, text_of(res)
        assert "02:00" in text_of(res)
    prompt = {"session_id": "sess", "transcript_path": str(tmp_path / "none.jsonl"),
              "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
              "prompt": "when do the orchard exports run?"}
    out = run_hook("prompt", json.dumps(prompt), Config.load(home=home))
    assert out.stderr == "", out.stderr
    assert "02:00" in json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    proc = _cli(home, "recall", "orchard exports", "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_doctor_reports_impossible_times_and_repair_fixes_them(tmp_path: Path) -> None:
    """Issue 9.1: `doctor` said ok over a `1e20` event time; now it reports and repairs it."""
    home = tmp_path / "s"
    _seed(home)
    with Memory.open(home, embedder=hashing(), project="global") as mem:
        report = mem.doctor()
        assert not report["ok"]
        assert report["checks"]["times"] == {
            "memories.event_time": 3, "memories.recorded_at": 0, "memories.updated_at": 0,
            "memories.last_access": 1, "turns.ts": 3, "turns.recorded_at": 0}
        assert {"times:memories.event_time", "times:memories.last_access",
                "times:turns.ts"} <= set(report["problems"])
        fixed = mem.doctor(repair=True)
        assert fixed["ok"], fixed
        assert "times:7" in fixed["repaired"]
        assert set(fixed["checks"]["times"].values()) == {0}
        assert mem.doctor()["ok"]
        assert scalar(mem, "SELECT count(*) FROM memories WHERE event_time IS NOT NULL") == 0
        assert scalar(mem, "SELECT last_access FROM memories WHERE id = 3") == MAX_TS
        assert scalar(mem, "SELECT count(*) FROM turns WHERE ts IS NOT NULL") == 0
        assert mem.introspect()["memories"] == 3 and mem.introspect()["turns"] == 3
        event = mem.events(kinds=["doctor_times"])[0]["data"]
        assert event["rows"] == 7
        assert event["old"]["memories.event_time"][0] == [1, "1e+20"]
        assert [1, "'soon'"] not in event["old"]["turns.ts"]
        assert any(v == "'soon'" for _, v in event["old"]["turns.ts"])
    proc = _cli(home, "doctor")
    assert proc.returncode == 0, proc.stderr

