"""The journal and the dream log keep to the reader's project (issue 33 item 3).

Reproducer: reading as project A, ``Memory.events()`` and the MCP ``dream_log`` returned
project B's words — sleep metrics carry topic-cluster labels built from B's keywords —
and B's writes and recalls with its name. On each backend (tests/backend.py).
"""

from __future__ import annotations

import json

import pytest
from tests.mcp.conftest import run_with, text_of

from mcp import Client
from tideline import Memory
from tideline.project import ProjectInfo

pytestmark = pytest.mark.backends
BRAVO_WORDS = ("obsidian", "lattice", "kernels", "zebra")


def _fill(mem: Memory) -> None:
    for i in range(8):
        mem.remember(f"zebra pipeline {i} runs obsidian lattice kernels", scope="bravo")
        mem.remember(f"heron notebook {i} mentions granite", scope="alpha")
    mem.recall("obsidian lattice", scope="bravo")
    mem.recall("heron granite", scope="alpha")
    mem.sleep(force=True)


def test_events_and_dream_log_show_only_the_readers_project(mem: Memory) -> None:
    _fill(mem)
    mem.use_project(ProjectInfo("alpha", "explicit", "alpha"))
    mine = mem.events(limit=1000)
    text = json.dumps(mine)
    assert "bravo" not in text and not [w for w in BRAVO_WORDS if w in text]
    assert {e["data"].get("scope") for e in mine if e["kind"] in ("write", "recall")} == {
        "alpha"}
    (slept,) = [e for e in mine if e["kind"] == "sleep"]
    assert slept["data"]["memories"]["after"] >= 2  # counts stay
    assert "top" not in slept["data"]["steps"].get("attention", {})  # labels and ids go

    async def body(c: Client) -> str:
        res = await c.call_tool("dream_log", {"limit": 1000})
        return text_of(res) + json.dumps(res.structured_content or {})

    shown = run_with(mem, body)
    assert "bravo" not in shown and not [w for w in BRAVO_WORDS if w in shown]
    assert "alpha" in shown
    # Bravo reads its own events; the namespace's sleep is cut for it too (alpha exists).
    mem.use_project(ProjectInfo("bravo", "explicit", "bravo"))
    theirs = json.dumps(mem.events(limit=1000))
    assert "bravo" in theirs and "heron" not in theirs and "alpha" not in theirs
    whole = json.dumps(mem.events(limit=1000, all_scopes=True))
    assert "bravo" in whole and "obsidian" in whole  # the operator's view has it all


def test_a_reader_of_every_scope_sees_sleep_whole(mem: Memory) -> None:
    """A store of one project (and global): nothing to hide, the metrics stay whole."""
    for i in range(6):
        mem.remember(f"heron notebook {i} mentions granite", scope="alpha")
    mem.sleep(force=True)
    mem.use_project(ProjectInfo("alpha", "explicit", "alpha"))
    (slept,) = mem.events(kinds=["sleep"], limit=5)
    assert slept["data"] == mem.events(kinds=["sleep"], limit=5, all_scopes=True)[0]["data"]


def test_aggregate_keeps_counts_and_drops_words_lists_and_ids() -> None:
    from tideline.journal import aggregate

    data = {"steps": {"attention": {"hits": 3, "top": [{"id": 4, "label": "a · b"}]},
                      "dynamics": {"ids": {"promoted": [7]}, "promoted": 1},
                      "topics": {"mode": "rebuilt", "clusters": 2}},
            "backup": "/srv/store/backups/x.db", "at": "2026-12-06T02:56:05+00:00",
            "by label": {"obsidian": 1}, "Obsidian": 2, "nearest": 9, "ok": True}
    assert aggregate(data) == {
        "steps": {"attention": {"hits": 3}, "dynamics": {"promoted": 1},
                  "topics": {"mode": "rebuilt", "clusters": 2}},
        "at": "2026-12-06T02:56:05+00:00", "ok": True}
